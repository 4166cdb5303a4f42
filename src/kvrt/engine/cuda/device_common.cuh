// Device-side helpers shared by the kernels: bf16 unpacking, warp reductions, streaming
// loads, programmatic dependent launch (PDL), and the launch wrapper that applies it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string_view>
#include <utility>

#include "kvrt/engine/cuda/kernels.h"

namespace kvrt::engine::cuda::detail {

// A bf16 is the top half of an f32: unpacking is a shift or a mask.
__device__ __forceinline__ float bf16_lo(uint32_t pair) {
  return __uint_as_float(pair << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t pair) {
  return __uint_as_float(pair & 0xffff0000u);
}
__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16(x));
}
// SwiGLU of a gate and up value already rounded to bf16, with HF's rounding points:
// bf16(silu(gate)) * up (the caller rounds the product).
__device__ __forceinline__ float swiglu_value(float gate, float up) {
  return round_bf16(gate / (1.0f + expf(-gate))) * up;
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&pair);
}

// 16 bytes of read-once data (weights), or zeros when !valid: a predicated load, so an
// unrolled loop issues all its loads back to back without branches. Not kept in L1, so
// staged activations stay there. Only for data no kernel of the stream writes (it may be
// issued before pdl_wait()).
__device__ __forceinline__ uint4 load_stream(const void* ptr, bool valid) {
  uint4 v;
  // volatile: kept in program order, so loads written back to back are issued back to
  // back instead of each next to its first use.
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %5, 0;\n"
      "  mov.b32 %0, 0;\n"
      "  mov.b32 %1, 0;\n"
      "  mov.b32 %2, 0;\n"
      "  mov.b32 %3, 0;\n"
      "  @p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      "}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr), "r"(static_cast<int>(valid)));
  return v;
}

// PDL: pdl_wait() blocks until the preceding kernel on the stream has completed and its
// writes are visible (a no-op without PDL). Every kernel calls it, in every thread,
// before it reads activations or writes anything, so that completion of any kernel
// implies completion of all kernels before it. pdl_launch_dependents() lets the next
// kernel's blocks be scheduled as soon as this one's are all running.
__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// ptxas moves griddepcontrol.wait above register loads (ld.global.nc) written before it
// (SASS: ACQBULK ahead of the LDG.E.NA...CONSTANT), so W loads meant to stream while the
// previous kernel runs are issued only after it ends. It does not move the wait above a
// shared-memory store: storing a value folded from the loaded registers into this thread's
// own `slot` keeps the loads ahead of the wait. They must then also land before it; in a
// chain that costs less than issuing pdl_launch_dependents() after them, which keeps them
// ahead too but lets the next launch in later, and no more than loads that are not .nc,
// which stay ahead without landing (docs/kernels-notes.md). cp.async copies write shared memory
// themselves and stayed where written in every kernel here (bench/lab/pdl_order.awk).
// `also`: one more loaded value to keep ahead (0, a constant, adds nothing).
template <int N>
__device__ __forceinline__ void keep_loads_before_wait(const uint4 (&loaded)[N], uint32_t* slot,
                                                       uint32_t also = 0) {
  uint32_t fold = also;
#pragma unroll
  for (int i = 0; i < N; ++i) fold ^= loaded[i].x ^ loaded[i].y ^ loaded[i].z ^ loaded[i].w;
  asm volatile(
      "st.shared.u32 [%0], %1;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(slot))),
      "r"(fold)
      : "memory");
}

// Sum of the squares of a chunk's 8 bf16 values.
__device__ __forceinline__ float sum_of_squares(uint4 chunk) {
  const uint32_t pairs[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float lo = bf16_lo(pairs[j]), hi = bf16_hi(pairs[j]);
    sum += lo * lo + hi * hi;
  }
  return sum;
}

// A chunk of x normalized with HF LlamaRMSNorm's rounding: bf16(bf16(x * inv_rms) * gamma).
__device__ __forceinline__ uint4 rms_normalize(uint4 chunk, uint4 gamma, float inv_rms) {
  const uint32_t in[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
  const uint32_t g[4] = {gamma.x, gamma.y, gamma.z, gamma.w};
  uint32_t out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    out[j] = pack_bf16(round_bf16(bf16_lo(in[j]) * inv_rms) * bf16_lo(g[j]),
                       round_bf16(bf16_hi(in[j]) * inv_rms) * bf16_hi(g[j]));
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Launches `kernel` on `stream`, with the PDL attribute when programmatic_launch() is on
// and the stream is a created one (the legacy default stream keeps plain ordering).
template <typename... Params, typename... Args>
Status launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
              std::string_view name, Args&&... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = programmatic_launch() && stream != nullptr ? 1 : 0;
  return cuda_check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name);
}

}  // namespace kvrt::engine::cuda::detail
