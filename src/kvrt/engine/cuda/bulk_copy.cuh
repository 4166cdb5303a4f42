// Hopper bulk copies (the TMA's 1-D form) and the shared-memory barriers that track
// them. One thread moves a whole contiguous run of global memory into shared memory with
// one instruction; the barrier's phase completes when every expected byte has landed.
//
// Producer/consumer ring: slot s has a `full` barrier (count 1: the producer's
// arrive_expect_tx, plus the copies' bytes) and an `empty` barrier (count: the
// consumers). The n-th use of a slot waits for phase n - 1 of `empty` and consumers wait
// for phase n of `full`; phases alternate parity 0, 1, 0, ...
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kvrt/engine/cuda/mma.cuh"

namespace kvrt::engine::cuda::detail {

__device__ __forceinline__ void barrier_init(uint64_t* barrier, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(barrier)), "r"(count)
               : "memory");
}

// Makes initialized barriers visible to the async (copy) proxy; then a block barrier.
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` of copies that will complete on this phase.
__device__ __forceinline__ void barrier_arrive_expect_tx(uint64_t* barrier, uint32_t bytes) {
  asm volatile(
      "{\n"
      "  .reg .b64 state;\n"
      "  mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n"
      "}\n" ::"r"(smem_address(barrier)),
      "r"(bytes)
      : "memory");
}

// One arrival (release: this thread's earlier shared-memory reads are done).
__device__ __forceinline__ void barrier_arrive(uint64_t* barrier) {
  asm volatile(
      "{\n"
      "  .reg .b64 state;\n"
      "  mbarrier.arrive.shared::cta.b64 state, [%0];\n"
      "}\n" ::"r"(smem_address(barrier))
      : "memory");
}

// Blocks until the phase with this parity has completed.
__device__ __forceinline__ void barrier_wait(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n"
      "  .reg .pred done;\n"
      "wait_%=:\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "  @!done bra wait_%=;\n"
      "}\n" ::"r"(smem_address(barrier)),
      "r"(parity)
      : "memory");
}

// An L2 cache policy for data read once: its lines are the first L2 evicts. Weights are
// read once per decode step, ~1 GB or more apart, so keeping them buys nothing, and
// marking them so made the decode steps ~1% faster (docs/kernels-notes.md).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// [src, src + bytes) -> shared dst, completing `bytes` on `barrier`, the lines cached in
// L2 under `l2_policy` (from createpolicy). Both addresses 16-byte aligned, bytes a
// multiple of 16.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* barrier, uint64_t l2_policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(barrier)), "l"(l2_policy)
      : "memory");
}

// A named barrier for `threads` threads (a multiple of 32), so a subset of the block's
// warps can synchronize without the others (id 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace kvrt::engine::cuda::detail
