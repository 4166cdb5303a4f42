// Host-side helpers shared by the kernel launchers (private to this folder): shared
// memory opt-in, occupancy for persistent grids, alignment checks, launch status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvrt/core/result.h"

namespace kvrt::engine::cuda::detail {

// Lets `kernel` use `bytes` of dynamic shared memory (raises the 48 KiB default once per
// kernel and size); error if the device offers less.
Status allow_shared_memory(const void* kernel, size_t bytes, std::string_view name);

// How many blocks of `threads` threads and `smem` dynamic shared bytes fit on one
// multiprocessor at once (cached per kernel, size and device); at least 1.
Result<int> resident_blocks(const void* kernel, int threads, size_t smem);

inline bool is_aligned(const void* ptr, size_t alignment) {
  return reinterpret_cast<uintptr_t>(ptr) % alignment == 0;
}

// True when [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto a0 = reinterpret_cast<uintptr_t>(a);
  auto b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

}  // namespace kvrt::engine::cuda::detail
