// Tensor-core building blocks (sm_80+ instructions, used on Hopper through mma.sync):
// cp.async tile copies, ldmatrix fragment loads and the m16n8k16 bf16 MMA.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4), 32-bit registers:
//   A 16x16: a0 = (row g,   cols 2t..2t+1)   a1 = (row g+8, cols 2t..2t+1)
//            a2 = (row g,   cols 2t+8..+9)   a3 = (row g+8, cols 2t+8..+9)
//   B 16x8:  b0 = (rows 2t..2t+1, col g)     b1 = (rows 2t+8..+9, col g)
//   C 16x8:  c0,c1 = (row g, cols 2t, 2t+1)  c2,c3 = (row g+8, cols 2t, 2t+1)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvrt::engine::cuda::detail {

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// 16 bytes global -> shared, asynchronously; zero-fills the destination when !valid
// (src must still be a valid address).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  cp_async_16(smem_address(dst), src, valid);
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most `kPending` committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(ptr))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(ptr))
               : "memory");
}

// c += A·B for one m16n8k16 tile.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace kvrt::engine::cuda::detail
