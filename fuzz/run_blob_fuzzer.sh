#!/usr/bin/env bash
# Builds the delegate blob reader's libFuzzer target (clang, ASan + UBSan) in its own
# build dir and runs it for a bounded time (A4). Used by CI (.ci/run).
#   fuzz/run_blob_fuzzer.sh SECONDS [extra libFuzzer flags...]
# Inputs that add coverage go to fuzz-corpus-work/blob (not committed); a crash is
# written to fuzz-corpus-work/blob/artifacts/ and makes the script fail. Turn every
# crash into a regression test in src/kvrt/format/test/ before fixing it.
set -euo pipefail
seconds=${1:?usage: fuzz/run_blob_fuzzer.sh SECONDS [libFuzzer flags...]}
shift
cd "$(dirname "$0")/.."

build=build-fuzz/blob
jobs=${KVRT_FUZZ_BUILD_JOBS:-2}
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DKVRT_CUDA=OFF -DKVRT_FUZZ=ON \
    -DKVRT_BUILD_TESTS=OFF -DKVRT_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >/dev/null
fi
cmake --build "$build" -j "$jobs" --target kvrt_fuzz_blob

work=fuzz-corpus-work/blob
mkdir -p "$work/artifacts"
# One process, one worker: the reader is single-threaded and CI machines are shared.
exec "$build/fuzz/kvrt_fuzz_blob" "$work" fuzz/corpus/blob \
  -dict=fuzz/blob.dict -max_total_time="$seconds" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$@"
