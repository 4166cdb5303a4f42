#!/usr/bin/env bash
# The GPU-machine run of the CUDA kernel library, from binaries built on the build
# machine and carried in DIST (gpu-dist/kernels/ by default): the kernel tests, the
# benchmark, then compute-sanitizer (memcheck, racecheck, initcheck, synccheck) on the
# test binary side by side (they share the GPU; their time goes mostly to the CPU
# references), the benchmark again to show the spread between runs, and the kernels'
# SASS, resource usage and PDL order (bench/lab/pdl_order.awk) for reading offline.
# Everything lands in $OUT.
# SWEEP=1 makes the first benchmark also time every decode_linear geometry, several
# decode_attention split counts and launch points, and the decode step's variants
# (kernels_bench --sweep).
#   OUT=DIR [SWEEP=1] bench/run_on_gpu.sh [DIST]
set -uo pipefail
dist=${1:-gpu-dist/kernels}
out=${OUT:-/tmp/kvrt-gpu}
mkdir -p "$out"
status=0
step() { echo; echo "=== $1 ($(date +%T))"; }

step device
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu \
  --format=csv

step "kernel tests"
timeout 200 "$dist/kvrt_cuda_kernels_test" --gtest_brief=1 || status=1

step "benchmark"
sweep=()
[ "${SWEEP:-0}" = 1 ] && sweep=(--sweep)
timeout 400 "$dist/kernels_bench" --out "$out/kernels_bench.md" "${sweep[@]}" || status=1

step "compute-sanitizer"
# racecheck runs twice: on the whole binary, and without the PrefillLinear tests, whose
# cuBLASLt kernels (nvjet_*) racecheck reports on; initcheck and synccheck likewise.
ours="--gtest_filter=-*PrefillLinear*"
sanitize() {  # NAME TOOL [gtest args]
  local name=$1 tool=$2
  shift 2
  timeout "${SANITIZER_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
    "$dist/kvrt_cuda_kernels_test" --gtest_brief=1 "$@" >"$out/$name.part" 2>&1
  echo "$name exit $?" >>"$out/$name.part"
}
sanitize memcheck memcheck &
sanitize racecheck racecheck &
sanitize racecheck_kvrt_kernels racecheck "$ours" &
sanitize initcheck_kvrt_kernels initcheck "$ours" &
sanitize synccheck_kvrt_kernels synccheck "$ours" &
wait
for name in memcheck racecheck racecheck_kvrt_kernels initcheck_kvrt_kernels \
            synccheck_kvrt_kernels; do
  echo "--- $name"
  grep -E "SUMMARY|PASSED|FAILED|exit" "$out/$name.part"
  { echo "=== $name"; cat "$out/$name.part"; } >>"$out/sanitizers.txt"
  rm -f "$out/$name.part"
done

step "benchmark again (spread between runs)"
timeout 150 "$dist/kernels_bench" --out "$out/kernels_bench_repeat.md" >/dev/null || status=1
cat "$out/kernels_bench_repeat.md"

step "sass"
cuobjdump -res-usage "$dist/kvrt_cuda_kernels_test" >"$out/res_usage.txt" 2>&1
cuobjdump -sass "$dist/kvrt_cuda_kernels_test" 2>&1 |
  awk '/Function : /{keep = /decode_linear|decode_attention/} keep' | gzip >"$out/sass.txt.gz"
# Where each kernel's loads sit against its PDL wait (ptxas may move the wait up).
cuobjdump -sass "$dist/kvrt_cuda_kernels_test" 2>&1 | awk -f "$(dirname "$0")/lab/pdl_order.awk" |
  (c++filt 2>/dev/null || cat) >"$out/pdl_order.txt"

step "done, status $status"
exit $status
