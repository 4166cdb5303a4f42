// Host side of trace.h: the current trace, the slot of each launch, and the clock rate.
#include <mutex>

#include "kvrt/engine/cuda/kernels.h"
#include "kvrt/engine/cuda/trace.cuh"

namespace kvrt::engine::cuda {
namespace {

std::mutex g_trace_mutex;
KernelTrace g_trace;
int64_t g_trace_launches = 0;

// Spins 2 ms of globaltimer and reports both clocks' progress.
__global__ void clock_rate_kernel(unsigned long long* out) {
  const uint64_t start_ns = detail::global_timer_ns();
  const long long start_clock = clock64();
  uint64_t now_ns = start_ns;
  while (now_ns - start_ns < 2000000) now_ns = detail::global_timer_ns();
  out[0] = now_ns - start_ns;
  out[1] = static_cast<unsigned long long>(clock64() - start_clock);
}

}  // namespace

bool kernel_trace_compiled() {
  return KVRT_KERNEL_TRACE != 0;
}

Status set_kernel_trace(const KernelTrace& trace) {
  if (!kernel_trace_compiled()) {
    return not_supported(
        "set_kernel_trace: this build records no timelines (configure with "
        "-DKVRT_KERNEL_TRACE=ON)");
  }
  if (trace.stamps != nullptr && (trace.launch_slots < 1 || trace.max_blocks < 1)) {
    return invalid_argument("set_kernel_trace: launch_slots and max_blocks must be positive");
  }
  std::lock_guard<std::mutex> lock(g_trace_mutex);
  g_trace = trace;
  g_trace_launches = 0;
  return Status();
}

Result<double> trace_clock_ghz() {
  unsigned long long* device = nullptr;
  KVRT_RETURN_IF_ERROR(cuda_check(cudaMalloc(&device, 2 * sizeof(*device)), "trace clock"));
  clock_rate_kernel<<<1, 1>>>(device);
  unsigned long long host[2] = {};
  const Status status =
      cuda_check(cudaMemcpy(host, device, sizeof(host), cudaMemcpyDeviceToHost), "trace clock");
  cudaFree(device);
  KVRT_RETURN_IF_ERROR(status);
  return static_cast<double>(host[1]) / static_cast<double>(host[0]);
}

namespace detail {

uint64_t* trace_rows_for_next_launch(int blocks) {
  std::lock_guard<std::mutex> lock(g_trace_mutex);
  if (g_trace.stamps == nullptr || blocks > g_trace.max_blocks) return nullptr;
  const int64_t slot = g_trace_launches++ % g_trace.launch_slots;
  return g_trace.stamps + slot * g_trace.max_blocks * kTracePoints;
}

}  // namespace detail
}  // namespace kvrt::engine::cuda
