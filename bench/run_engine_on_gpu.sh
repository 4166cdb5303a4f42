#!/usr/bin/env bash
# The GPU-machine run of the CUDA engine end to end, from binaries built on the build
# machine and carried in DIST (gpu-dist/ by default: kvrt, kvrt_cuda_kernels_test,
# kvrt_cuda_engine_test, kernels_bench, kvrt_make_random_checkpoint, and the lab's
# decode_gaps when present): the kernel and
# engine tests, `kvrt check --device cuda` on every fixture with a reference and on the
# bundled model, `kvrt run` on the GPU, then `kvrt bench` on random checkpoints of the
# TinyLlama-1.1B and Llama-3.2-1B shapes beside the kernel library's own captured decode
# step, twice in alternation (the spread between runs), and once with one graph launch per
# token (--steps-per-launch 1). $OUT gets checks.txt,
# bench.jsonl (one `kvrt bench --json` a line), sanitizers.txt; the tables go to stdout.
#   OUT=DIR [ROUNDS=2] [SANITIZE=1] bench/run_engine_on_gpu.sh [DIST]
set -uo pipefail
dist=${1:-gpu-dist}
out=${OUT:-/tmp/kvrt-gpu}
mkdir -p "$out"
export KVRT_SOURCE_DIR=$PWD  # the tests' fixtures, wherever the binaries were built
status=0
step() { echo; echo "=== $1 ($(date +%T))"; }

step device
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv

step "kernel tests"
timeout 200 "$dist/kvrt_cuda_kernels_test" --gtest_brief=1 || status=1
step "engine tests"
timeout 150 "$dist/kvrt_cuda_engine_test" --gtest_brief=1 || status=1

step "checks against HF (G1, G2 with the bf16 rule)"
for model in tests/fixtures/*/ models/fortune-llama/; do
  [ -f "$model/reference.json" ] || continue
  if timeout 60 "$dist/kvrt" check "$model" --device cuda --reference "$model/reference.json" \
      >"$out/check.part" 2>&1; then
    echo "PASS $model: $(grep -iE 'max|g2' "$out/check.part" | head -2 | tr '\n' ' ')"
  else
    # Families the CUDA engine refuses by name (README) fail here with NotSupported.
    echo "FAIL $model: $(tail -2 "$out/check.part" | tr '\n' ' ')"
  fi
  cat "$out/check.part" >>"$out/checks.txt"
done
rm -f "$out/check.part"

step "kvrt run on the GPU"
timeout 60 "$dist/kvrt" run models/fortune-llama --device auto --prompt "The meaning of life is" \
  -n 48 --temperature 0 || status=1

step "benchmark checkpoints"
"$dist/kvrt_make_random_checkpoint" /tmp/tinyllama --dtype bf16 --max-positions 8192 || status=1
"$dist/kvrt_make_random_checkpoint" /tmp/llama32 --dtype bf16 --max-positions 8192 --layers 16 \
  --hidden 2048 --intermediate 8192 --heads 32 --kv-heads 8 --vocab 128256 || status=1

for round in $(seq 1 "${ROUNDS:-2}"); do
  step "kvrt bench, round $round"
  for model in tinyllama llama32; do
    timeout 150 "$dist/kvrt" bench "/tmp/$model" -p 512 -n 128 -d 0,4096 -r 3 --device cuda \
      --json >/tmp/bench.json || status=1
    tr -d '\n' </tmp/bench.json >>"$out/bench.jsonl" && echo >>"$out/bench.jsonl"
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])))[:4000])' \
      /tmp/bench.json || cat /tmp/bench.json
    if [ "$round" = 1 ]; then  # tg with one graph launch per token, for the comparison
      timeout 150 "$dist/kvrt" bench "/tmp/$model" -p 0 -n 128 -d 0,4096 -r 3 --device cuda \
        --steps-per-launch 1 --json >/tmp/bench.json || status=1
      tr -d '\n' </tmp/bench.json >>"$out/bench.jsonl" && echo >>"$out/bench.jsonl"
      python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])))[:4000])' \
        /tmp/bench.json || cat /tmp/bench.json
    fi
  done
  step "kernel library's decode step, round $round"
  timeout 150 "$dist/kernels_bench" --quick --only "decode step" --out /tmp/kernel_step.md \
    >/dev/null || status=1
  grep -E "decode step" /tmp/kernel_step.md
done

if [ -x "$dist/decode_gaps" ]; then
  step "where the time between steps goes (bench/lab/decode_gaps)"
  for model in tinyllama llama32; do
    "$dist/kvrt" export "/tmp/$model" -o "/tmp/$model.kvrt" --target cuda --max-seq 8192 \
      >/dev/null 2>&1 || status=1
    for depth in 4095 4096; do  # 4096 keys (the kernel benchmark's), then 4097
      echo "$model, position $depth:"
      timeout 120 "$dist/decode_gaps" "/tmp/$model.kvrt" --steps 96 --depth "$depth" || status=1
    done
  done
fi

if [ "${SANITIZE:-0}" = 1 ]; then
  step "compute-sanitizer on the engine tests and the changed kernels"
  filter="--gtest_filter=*DecodeAttention*:*LmHeadArgmax*:*Graph*"
  timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$dist/kvrt_cuda_engine_test" --gtest_brief=1 >"$out/memcheck_engine.txt" 2>&1 &
  timeout 280 compute-sanitizer --tool racecheck --error-exitcode 3 \
    "$dist/kvrt_cuda_engine_test" --gtest_brief=1 >"$out/racecheck_engine.txt" 2>&1 &
  timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$dist/kvrt_cuda_kernels_test" --gtest_brief=1 "$filter" >"$out/memcheck_kernels.txt" 2>&1 &
  timeout 280 compute-sanitizer --tool racecheck --error-exitcode 3 \
    "$dist/kvrt_cuda_kernels_test" --gtest_brief=1 "$filter" >"$out/racecheck_kernels.txt" 2>&1 &
  wait
  for f in "$out"/memcheck_*.txt "$out"/racecheck_*.txt; do
    echo "--- $(basename "$f"): $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$f" |
      tr '\n' ' ')"
    { echo "=== $(basename "$f")"; cat "$f"; } >>"$out/sanitizers.txt"
    rm -f "$f"
  done
fi

step "done, status $status"
exit $status
