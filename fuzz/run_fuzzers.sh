#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a bounded time
# on a seed corpus made from the repository's real files (models/, tests/fixtures/).
#   fuzz/run_fuzzers.sh SECONDS_EACH [program|safetensors|config|tokenizer|template|blob ...]
# Inputs that add coverage go to fuzz-corpus-work/<name>/ (not committed); a crash,
# leak, timeout or sanitizer report is written to fuzz-corpus-work/<name>/artifacts/ and
# makes the script fail. Turn every crash into a regression test before fixing it.
# KVRT_FUZZ_BUILD_JOBS sets the build's parallelism (default 2); KVRT_FUZZ_NO_BUILD=1
# runs the targets as they are built; KVRT_FUZZ_BUILD_DIR names an existing clang build
# configured with -DKVRT_FUZZ=ON (CI reuses its ASan+UBSan test tree).
set -euo pipefail
seconds=${1:?usage: fuzz/run_fuzzers.sh SECONDS_EACH [fuzzer...]}
shift
cd "$(dirname "$0")/.."
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(program safetensors config tokenizer template blob)

# -O1 with line tables: the usual fuzzing build (fast to compile, assertions on, stack
# traces with lines).
build=${KVRT_FUZZ_BUILD_DIR:-build-fuzz/all}
jobs=${KVRT_FUZZ_BUILD_JOBS:-2}
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DKVRT_CUDA=OFF -DKVRT_FUZZ=ON \
    -DKVRT_BUILD_TESTS=OFF -DKVRT_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" >/dev/null
fi
targets=()
for name in "${names[@]}"; do targets+=("kvrt_fuzz_$name"); done
# The program seeds are exported by the (instrumented) CLI from a fixture checkpoint.
[[ " ${names[*]} " == *" program "* ]] && targets+=(kvrt_cli)
[ -n "${KVRT_FUZZ_NO_BUILD:-}" ] || cmake --build "$build" -j "$jobs" --target "${targets[@]}"

work=fuzz-corpus-work
fixtures=tests/fixtures
# seeds NAME: the seed directory of one fuzzer, filled from real files.
seeds() {
  local dir="$work/$1/seeds"
  rm -rf "$dir"
  mkdir -p "$dir"
  case $1 in
    program)
      "$build/kvrt" export "$fixtures/llama_gqa" -o "$dir/llama_gqa.kvrt" --max-seq 8 -q >/dev/null
      "$build/kvrt" export "$fixtures/qwen2_bias" -o "$dir/qwen2_bias.kvrt" --max-seq 8 \
        --dtype bf16 -q >/dev/null ;;
    safetensors)
      for f in "$fixtures"/*/*.safetensors; do cp "$f" "$dir/$(basename "$(dirname "$f")")_$(basename "$f")"; done ;;
    config)
      for f in "$fixtures"/*/config.json "$fixtures"/*/generation_config.json models/*/*config.json; do
        cp "$f" "$dir/$(basename "$(dirname "$f")")_$(basename "$f")"
      done ;;
    tokenizer)
      for f in "$fixtures"/tokenizers/*/tokenizer.json src/kvrt/generation/test/data/*.json; do
        grep -q '"model"' "$f" || continue
        { cat "$f"; printf '\0'; printf 'Hello world, <s> 12 ünï 😀\n'; } > "$dir/$(basename "$(dirname "$f")")_$(basename "$f")"
      done
      cp models/fortune-llama/tokenizer.json "$dir/fortune-llama.json" ;;
    template)
      for f in "$fixtures"/chat_templates/*.jinja; do
        { cat "$f"; printf '\0'; cat "$fixtures/chat_templates/messages/multi_turn_system.json"; } > "$dir/$(basename "$f")"
      done ;;
    blob)
      cp fuzz/corpus/blob/* "$dir/" ;;
  esac
}

declare -A max_len=([program]=600000 [safetensors]=600000 [config]=8192 [tokenizer]=300000
                    [template]=16384 [blob]=4096)
status=0
for name in "${names[@]}"; do
  seeds "$name"
  mkdir -p "$work/$name/artifacts" "$work/$name/corpus"
  extra=()
  [ "$name" = blob ] && extra+=(-dict=fuzz/blob.dict)
  echo "=== fuzzing $name for ${seconds}s"
  # One process, one worker: CI machines are shared. The harness bounds what it
  # loads itself; a single allocation above 2 GB is a finding.
  if ! "$build/fuzz/kvrt_fuzz_$name" "$work/$name/corpus" "$work/$name/seeds" \
      -max_total_time="$seconds" -max_len="${max_len[$name]}" -timeout=20 -rss_limit_mb=3072 \
      -artifact_prefix="$work/$name/artifacts/" -print_final_stats=1 "${extra[@]}" \
      2>"$work/$name/log" ; then
    status=1
    echo "fuzzer $name FAILED: see $work/$name/log and $work/$name/artifacts/"
    grep -E "ERROR|SUMMARY|==ERROR|Test unit written" "$work/$name/log" | head -5 || true
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$work/$name/log" || true
done
exit $status
