// The rotary embedding's arithmetic, shared by rope_kv_write and decode_attention's fused
// rope so that both produce the same bits: HF's rotate_half, the pair
// (x[j], x[j + head_dim/2]) turned by position * inv_freq[j].
#pragma once

#include "kvrt/engine/cuda/device_common.cuh"

namespace kvrt::engine::cuda::detail {

// cos and sin of position * inv_freq (one f32 product, as HF forms the angle), times the
// rope type's attention scaling.
__device__ __forceinline__ void rope_angle(int position, float inv_freq, float scaling,
                                           float* cos_v, float* sin_v) {
  sincosf(static_cast<float>(position) * inv_freq, sin_v, cos_v);
  *cos_v *= scaling;
  *sin_v *= scaling;
}

// (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), rounded to bf16. Each product and sum is
// rounded on its own (no FMA contraction), so every kernel gets the same result.
__device__ __forceinline__ void rope_rotate(float x1, float x2, float cos_v, float sin_v,
                                            bf16* out1, bf16* out2) {
  *out1 = __float2bfloat16(__fsub_rn(__fmul_rn(x1, cos_v), __fmul_rn(x2, sin_v)));
  *out2 = __float2bfloat16(__fadd_rn(__fmul_rn(x2, cos_v), __fmul_rn(x1, sin_v)));
}

}  // namespace kvrt::engine::cuda::detail
