// Pieces shared by the decode and prefill attention kernels: K/V tile loads from the
// cache, Q·Kᵀ and P·V on tensor cores, and the online-softmax update (FlashAttention-2).
//
// A warp owns 16 query rows (the MMA's M) and a run of keys. Shared-memory tiles are
// row-major [key][head_dim + 8]: the 16-byte pad puts the 8 rows an ldmatrix reads in
// 8 different bank groups. Scores are kept in log2 units (scale * log2(e) folded in) so
// the softmax uses exp2f.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/mma.cuh"

namespace kvrt::engine::cuda::detail {

constexpr int kAttnTileKeys = 64;  // keys per shared-memory tile (decode may use more)

// The softmax scale in log2 units (scores go through exp2f): `scale`, or 1/sqrt(head_dim)
// when it is not positive, times log2(e).
inline float attention_scale_log2(float scale, int head_dim) {
  const float s = scale > 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  return s * 1.4426950408889634f;
}

// Copies cache rows [key0, key0 + kKeys) of one head into a tile (cp.async, all threads
// of the block); rows at or past key_end are zero-filled, so garbage (even NaN) beyond
// the live cache never reaches the MMAs. Row `skip_key` is left alone (its caller writes
// it). kUnrolled: a thread's rows as straight-line code rather than a loop.
template <int kDim, int kThreads, int kKeys = kAttnTileKeys, bool kUnrolled = true>
__device__ __forceinline__ void load_kv_tile(bf16* k_tile, bf16* v_tile, const bf16* k_head,
                                             const bf16* v_head, int key0, int key_end,
                                             int skip_key = -1) {
  constexpr int kChunks = kDim / 8, kStride = kDim + 8;
  if constexpr (kThreads % kChunks == 0 && kKeys % (kThreads / kChunks) == 0) {
    // Thread t copies chunk t % kChunks of rows t / kChunks, + kRowStep, ...: its
    // addresses advance by constants, so a row costs a compare and two copies (the loop
    // below works out each copy's row, chunk and addresses again).
    constexpr int kRowStep = kThreads / kChunks;
    const int row = static_cast<int>(threadIdx.x) / kChunks;
    const int column = (static_cast<int>(threadIdx.x) - row * kChunks) * 8;
    const uint32_t k_dst = smem_address(k_tile + row * kStride + column);
    const uint32_t v_dst = smem_address(v_tile + row * kStride + column);
    const size_t src0 = static_cast<size_t>(key0 + row) * kDim + column;
#pragma unroll(kUnrolled ? kKeys / kRowStep : 1)
    for (int j = 0; j < kKeys / kRowStep; ++j) {
      const int key = key0 + row + j * kRowStep;
      if (key == skip_key) continue;
      const bool valid = key < key_end;
      const size_t src = valid ? src0 + static_cast<size_t>(j) * kRowStep * kDim : 0;
      const uint32_t dst_offset = j * kRowStep * kStride * sizeof(bf16);
      cp_async_16(k_dst + dst_offset, k_head + src, valid);
      cp_async_16(v_dst + dst_offset, v_head + src, valid);
    }
  } else {
    for (int i = threadIdx.x; i < kKeys * kChunks; i += kThreads) {
      const int r = i / kChunks, c = i - r * kChunks;
      const int key = key0 + r;
      if (key == skip_key) continue;
      const bool valid = key < key_end;
      const size_t offset = static_cast<size_t>(valid ? key : 0) * kDim + c * 8;
      cp_async_16(k_tile + r * kStride + c * 8, k_head + offset, valid);
      cp_async_16(v_tile + r * kStride + c * 8, v_head + offset, valid);
    }
  }
}

// A fragments of 16 query rows (rows of `q_rows`, row stride `stride` elements).
template <int kDim>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qf)[kDim / 16][4], const bf16* q_rows,
                                                 int stride) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int ks = 0; ks < kDim / 16; ++ks) {
    ldmatrix_x4(qf[ks],
                q_rows + ((lane & 7) + ((lane >> 3) & 1) * 8) * stride + ks * 16 + (lane >> 4) * 8);
  }
}

// s[n] (16 rows x 8 keys each) = Q · K[keys 8n..8n+7]ᵀ for the kKeys keys at k_rows.
template <int kDim, int kKeys>
__device__ __forceinline__ void scores(float (&s)[kKeys / 8][4], const uint32_t (&qf)[kDim / 16][4],
                                       const bf16* k_rows, int stride) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int n2 = 0; n2 < kKeys / 16; ++n2) {
#pragma unroll
    for (int ks = 0; ks < kDim / 16; ++ks) {
      uint32_t kb[4];
      ldmatrix_x4(kb, k_rows + (n2 * 16 + (lane & 7) + (lane >> 4) * 8) * stride + ks * 16 +
                          ((lane >> 3) & 1) * 8);
      mma_bf16(s[2 * n2], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], kb[0], kb[1]);
      mma_bf16(s[2 * n2 + 1], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], kb[2], kb[3]);
    }
  }
}

// Folds masked, log2-scaled scores into this thread's two rows (g and g + 8) of the
// running softmax: m (max), l (this thread's share of the sum), o (unnormalized output).
// On return s holds exp2(s - m) and p the same values as bf16 A fragments for P·V.
template <int kKeys, int kDim>
__device__ __forceinline__ void online_softmax(float (&s)[kKeys / 8][4], float (&m)[2],
                                               float (&l)[2], float (&o)[kDim / 8][4],
                                               uint32_t (&p)[kKeys / 16][4]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float block_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      block_max = fmaxf(block_max, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    }
    block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
    block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 2));
    const float m_new = fmaxf(m[r], block_max);
    // A row with nothing unmasked yet keeps m = -inf; subtract 0 so exp2 gives 0, not NaN.
    const float base = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(m[r] - base);
    m[r] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      s[n][2 * r] = exp2f(s[n][2 * r] - base);
      s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - base);
      sum += s[n][2 * r] + s[n][2 * r + 1];
    }
    l[r] = l[r] * alpha + sum;
#pragma unroll
    for (int d = 0; d < kDim / 8; ++d) {
      o[d][2 * r] *= alpha;
      o[d][2 * r + 1] *= alpha;
    }
  }
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    p[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// o (16 rows x kDim) += P (16 x kKeys) · V[kKeys rows at v_rows].
template <int kKeys, int kDim>
__device__ __forceinline__ void accumulate_pv(float (&o)[kDim / 8][4],
                                              const uint32_t (&p)[kKeys / 16][4],
                                              const bf16* v_rows, int stride) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
#pragma unroll
    for (int dp = 0; dp < kDim / 16; ++dp) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, v_rows + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * stride +
                                dp * 16 + (lane >> 4) * 8);
      mma_bf16(o[2 * dp], p[kk][0], p[kk][1], p[kk][2], p[kk][3], vb[0], vb[1]);
      mma_bf16(o[2 * dp + 1], p[kk][0], p[kk][1], p[kk][2], p[kk][3], vb[2], vb[3]);
    }
  }
}

// Completes this thread's share of the row sums across the 4 lanes of its quad.
__device__ __forceinline__ void reduce_row_sums(float (&l)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
}

}  // namespace kvrt::engine::cuda::detail
