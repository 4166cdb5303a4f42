#!/usr/bin/env bash
# The GPU-machine run of the model families on the CUDA engine (docs/cuda-families.md),
# from binaries built on the build machine and carried in DIST (kvrt,
# kvrt_cuda_kernels_test, kvrt_cuda_engine_test, kvrt_make_random_checkpoint):
#   - the kernel tests (the family ops among them) and the engine tests (every fixture,
#     the family fixtures among them, against the CPU engine);
#   - `kvrt check --device cuda` against HF on every fixture, and on <family>_wide
#     variants made here by transformers (head dims 64 and 128: the fast attention
#     kernels under each family's layers);
#   - compute-sanitizer memcheck on the family kernel tests and family engine tests;
#   - `kvrt bench` on random checkpoints in the shapes of Qwen3-0.6B and Gemma-3-1B (made
#     by transformers) and Llama-3.2-1B, and HF's own loop on the same checkpoints.
# $OUT gets checks.txt, bench.jsonl and sanitizers.txt; the tables go to stdout.
#   OUT=DIR bench/run_families_on_gpu.sh [DIST]
set -uo pipefail
dist=${1:-gpu-dist}
out=${OUT:-/tmp/kvrt-gpu}
mkdir -p "$out"
export KVRT_SOURCE_DIR=$PWD  # the tests' fixtures, wherever the binaries were built
status=0
step() { echo; echo "=== $1 ($(date +%T))"; }

check() {  # check MODEL_DIR: kvrt check on the GPU against the HF reference beside it
  local model=$1
  if timeout 90 "$dist/kvrt" check "$model" --device cuda --reference "$model/reference.json" \
      >"$out/check.part" 2>&1; then
    echo "PASS $model: $(grep -iE 'max|g2|greedy' "$out/check.part" | head -3 | tr '\n' ' ')"
  else
    echo "FAIL $model: $(tail -3 "$out/check.part" | tr '\n' ' ')"
    status=1
  fi
  cat "$out/check.part" >>"$out/checks.txt"
  rm -f "$out/check.part"
}

step device
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__)'

step "kernel tests"
timeout 240 "$dist/kvrt_cuda_kernels_test" --gtest_brief=1 || status=1
step "engine tests"
timeout 240 "$dist/kvrt_cuda_engine_test" --gtest_brief=1 || status=1

step "checks against HF (G1, G2 with the bf16 rule)"
for model in tests/fixtures/*/ models/fortune-llama/; do
  [ -f "$model/reference.json" ] && check "${model%/}"
done

step "wide variants (head dims 64 and 128), made by transformers here"
if timeout 240 python3 scripts/reference/make_family_fixtures.py --out /tmp/wide --wide \
    >"$out/wide.txt" 2>&1; then
  for model in /tmp/wide/*/; do check "${model%/}"; done
else
  echo "FAIL making the wide variants:"; tail -20 "$out/wide.txt"; status=1
fi

step "compute-sanitizer memcheck on the family kernels and engine tests"
timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 "$dist/kvrt_cuda_kernels_test" \
  --gtest_brief=1 "--gtest_filter=*RowNorm*:*Geglu*:*Scale*:*Softcap*:*Partial*:*Window*" \
  >"$out/memcheck_kernels.txt" 2>&1 &
timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 "$dist/kvrt_cuda_engine_test" \
  --gtest_brief=1 "--gtest_filter=*qwen3*:*mistral*:*phi3*:*gemma*" \
  >"$out/memcheck_engine.txt" 2>&1 &
wait
for f in "$out"/memcheck_*.txt; do
  echo "--- $(basename "$f"): $(grep -E "ERROR SUMMARY|PASSED|FAILED" "$f" | tr '\n' ' ')"
  grep -q "ERROR SUMMARY: 0 errors" "$f" || status=1
  { echo "=== $(basename "$f")"; cat "$f"; } >>"$out/sanitizers.txt"
  rm -f "$f"
done

step "benchmark checkpoints"
for shape in qwen3-0.6b gemma3-1b; do
  timeout 240 python3 bench/make_family_checkpoint.py "$shape" "/tmp/$shape" || status=1
done
"$dist/kvrt_make_random_checkpoint" /tmp/llama3.2-1b --dtype bf16 --max-positions 8192 \
  --layers 16 --hidden 2048 --intermediate 8192 --heads 32 --kv-heads 8 --vocab 128256 ||
  status=1

step "kvrt bench"
for model in qwen3-0.6b gemma3-1b llama3.2-1b; do
  timeout 200 "$dist/kvrt" bench "/tmp/$model" -p 512 -n 128 -d 0,4096 -r 3 --device cuda \
    --json >/tmp/bench.json || status=1
  tr -d '\n' </tmp/bench.json >>"$out/bench.jsonl" && echo >>"$out/bench.jsonl"
  python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])))[:3000])' \
    /tmp/bench.json || cat /tmp/bench.json
done

step "HF transformers' own loop on the same checkpoints (the peer)"
for model in qwen3-0.6b gemma3-1b; do
  timeout 240 python3 bench/peer_bench.py "/tmp/$model" -p 512 -n 128 -d 0,4096 -r 3 \
    --peers hf --json "$out/peer_$model.json" 2>&1 | tail -6 || status=1
done

step "done, status $status"
exit $status
