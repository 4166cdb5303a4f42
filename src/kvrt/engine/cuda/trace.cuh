// Device side of trace.h: thread 0 of a block keeps its stamps in shared memory (a
// clock read and a shared store each, so tracing barely moves what it measures) and
// writes them out once at the end. Without KVRT_KERNEL_TRACE every macro is empty.
#pragma once

#include <cstdint>

#include "kvrt/engine/cuda/trace.h"

namespace kvrt::engine::cuda::detail {

static_assert(kTracePoints <= 16, "KVRT_TRACE_BEGIN keeps 16 stamps");

// This launch's rows (the trace's stamps at its slot), or null when it records nothing.
uint64_t* trace_rows_for_next_launch(int blocks);

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

#if KVRT_KERNEL_TRACE
// 128 bytes, 128-byte aligned: the dynamic shared memory after it (the kernels' rings)
// keeps its alignment, without which the copy engine lands slots markedly slower.
#define KVRT_TRACE_BEGIN()                                                                        \
  __shared__ __align__(128) uint64_t kvrt_trace_stamps[16];                                       \
  if (threadIdx.x == 0) {                                                                         \
    kvrt_trace_stamps[::kvrt::engine::cuda::kTraceEntry] =                                        \
        ::kvrt::engine::cuda::detail::global_timer_ns();                                          \
    kvrt_trace_stamps[::kvrt::engine::cuda::kTraceEntryClock] = clock64();                        \
    for (int kvrt_point = 1; kvrt_point < ::kvrt::engine::cuda::kTraceEntryClock; ++kvrt_point) { \
      kvrt_trace_stamps[kvrt_point] = 0;                                                          \
    }                                                                                             \
  }
#define KVRT_TRACE(point) (kvrt_trace_stamps[::kvrt::engine::cuda::point] = clock64())
#define KVRT_TRACE_END(rows)                                                                  \
  if (threadIdx.x == 0 && (rows) != nullptr) {                                                \
    for (int kvrt_point = 0; kvrt_point < ::kvrt::engine::cuda::kTracePoints; ++kvrt_point) { \
      (rows)[(blockIdx.y * gridDim.x + blockIdx.x) * ::kvrt::engine::cuda::kTracePoints +     \
             kvrt_point] = kvrt_trace_stamps[kvrt_point];                                     \
    }                                                                                         \
  }
#else
#define KVRT_TRACE_BEGIN()
#define KVRT_TRACE(point) ((void)0)
#define KVRT_TRACE_END(rows)
#endif

}  // namespace kvrt::engine::cuda::detail
