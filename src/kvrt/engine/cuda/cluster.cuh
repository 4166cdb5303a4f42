// Thread-block clusters (Hopper): the block's rank, the cluster barrier, and one block
// handing values to another through distributed shared memory, signalled on a
// shared-memory barrier (bulk_copy.cuh) of the receiving block.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kvrt/engine/cuda/mma.cuh"

namespace kvrt::engine::cuda::detail {

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// Every thread of the cluster arrives (release: this block's barrier initializations,
// fenced by barrier_init_fence, are visible to the others) ...
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}
// ... and waits, before its first access to another block's shared memory, until every
// thread of the cluster has arrived.
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// The address of `ptr` (this block's shared memory) in block `rank`'s shared memory.
__device__ __forceinline__ uint32_t peer_address(const void* ptr, uint32_t rank) {
  uint32_t address;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(address)
               : "r"(smem_address(ptr)), "r"(rank));
  return address;
}

__device__ __forceinline__ void peer_store(uint32_t address, float value) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(address), "f"(value) : "memory");
}

// One arrival on a barrier of another block (release at cluster scope: this thread's
// peer_store()s before it are visible to whoever the barrier's phase releases).
__device__ __forceinline__ void peer_barrier_arrive(uint32_t barrier_address) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(barrier_address)
               : "memory");
}

// Blocks until this block's barrier completes the phase with this parity, acquiring at
// cluster scope what the arriving blocks stored before their arrivals.
__device__ __forceinline__ void barrier_wait_cluster(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n"
      "  .reg .pred done;\n"
      "wait_%=:\n"
      "  mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "  @!done bra wait_%=;\n"
      "}\n" ::"r"(smem_address(barrier)),
      "r"(parity)
      : "memory");
}

}  // namespace kvrt::engine::cuda::detail
