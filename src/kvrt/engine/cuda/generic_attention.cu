// Causal attention over the bf16 cache for any head_dim the fast kernels are not built
// for (up to 256, multiples of 2), with an optional sliding window (the keys start at
// position - window + 1): one block per (token, query head), each warp keeping an
// online softmax over every kWarps-th key, the warps merged at the end. Simple and exact
// in f32; the tiny head dims of test models, head dim 256 (Gemma 3) and windowed layers
// run here. A warp walks its keys one at a time, so a decode step (a few blocks) gets 32
// warps a block to keep enough keys in flight; prefill, with a block per token, gets 4.
#include <cmath>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/kernels.h"

namespace kvrt::engine::cuda {
namespace {

using detail::launch;
using detail::pdl_launch_dependents;
using detail::pdl_wait;

constexpr int kMaxDim = 256, kPerLane = kMaxDim / 32;

struct Params {
  const bf16* q;
  int64_t q_stride;  // elements between tokens
  const bf16* k;
  const bf16* v;
  const int32_t* positions;  // [tokens]
  bf16* out;                 // [tokens, q_heads, head_dim]
  int q_heads, kv_heads, head_dim, max_seq;
  int window;  // 0: none
  float scale;
};

template <int kWarps>
__global__ void __launch_bounds__(32 * kWarps) generic_attention_kernel(Params p) {
  constexpr int kThreads = 32 * kWarps;
  pdl_launch_dependents();
  pdl_wait();
  const int token = static_cast<int>(blockIdx.y), head = static_cast<int>(blockIdx.x);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int kv_head = head / (p.q_heads / p.kv_heads);
  const int position = p.positions[token];
  const int keys = position < 0 ? 0 : (position >= p.max_seq ? p.max_seq : position + 1);
  // The window counts back from the position itself (HF: kv_idx > q_idx - window).
  const int first = p.window > 0 && position >= p.window ? position - p.window + 1 : 0;
  const bf16* q = p.q + token * p.q_stride + static_cast<int64_t>(head) * p.head_dim;
  const bf16* k = p.k + static_cast<int64_t>(kv_head) * p.max_seq * p.head_dim;
  const bf16* v = p.v + static_cast<int64_t>(kv_head) * p.max_seq * p.head_dim;

  float qd[kPerLane], acc[kPerLane];
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    qd[i] = d < p.head_dim ? __bfloat162float(q[d]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = first + warp; j < keys; j += kWarps) {
    const bf16* kj = k + static_cast<int64_t>(j) * p.head_dim;
    float s = 0.0f;
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < p.head_dim) s += qd[i] * __bfloat162float(kj[d]);
    }
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    s *= p.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new), weight = expf(s - m_new);
    l = l * correction + weight;
    const bf16* vj = v + static_cast<int64_t>(j) * p.head_dim;
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * correction + (d < p.head_dim ? weight * __bfloat162float(vj[d]) : 0.0f);
    }
    m = m_new;
  }
  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_acc[kWarps][kMaxDim];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < p.head_dim) warp_acc[warp][d] = acc[i];
  }
  __syncthreads();
  float total_m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) total_m = fmaxf(total_m, warp_m[w]);
  float total_l = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    if (warp_l[w] > 0.0f) total_l += warp_l[w] * expf(warp_m[w] - total_m);
  }
  bf16* out = p.out + (static_cast<int64_t>(token) * p.q_heads + head) * p.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < p.head_dim; d += kThreads) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (warp_l[w] > 0.0f) o += warp_acc[w][d] * expf(warp_m[w] - total_m);
    }
    out[d] = __float2bfloat16(total_l > 0.0f ? o / total_l : 0.0f);
  }
}

}  // namespace

bool generic_attention_supports(int head_dim) {
  return head_dim >= 2 && head_dim <= kMaxDim && head_dim % 2 == 0;
}

Status generic_attention(const GenericAttention& op, cudaStream_t stream) {
  if (op.q == nullptr || op.k_cache == nullptr || op.v_cache == nullptr ||
      op.positions == nullptr || op.out == nullptr) {
    return invalid_argument("generic_attention: q, caches, positions and out must be non-null");
  }
  if (op.tokens < 1 || op.q_heads < 1 || op.kv_heads < 1 || op.q_heads % op.kv_heads != 0 ||
      op.max_seq < 1) {
    return invalid_argument(
        "generic_attention: tokens, heads (q a multiple of kv) and max_seq "
        "must be positive");
  }
  if (!generic_attention_supports(op.head_dim)) {
    return not_supported("generic_attention: head_dim ", op.head_dim, " (even, at most 256)");
  }
  if (op.window < 0) {
    return invalid_argument("generic_attention: window must be 0 (none) or positive, got ",
                            op.window);
  }
  Params p;
  p.q = op.q;
  p.q_stride =
      op.q_token_stride != 0 ? op.q_token_stride : static_cast<int64_t>(op.q_heads) * op.head_dim;
  p.k = op.k_cache;
  p.v = op.v_cache;
  p.positions = op.positions;
  p.out = op.out;
  p.q_heads = op.q_heads;
  p.kv_heads = op.kv_heads;
  p.head_dim = op.head_dim;
  p.max_seq = op.max_seq;
  p.window = op.window;
  p.scale = op.scale != 0.0f ? op.scale : 1.0f / std::sqrt(static_cast<float>(op.head_dim));
  // Fewer blocks than about two waves of multiprocessors: wide blocks.
  const dim3 grid(op.q_heads, op.tokens);
  if (op.tokens * op.q_heads < 256) {
    return launch(generic_attention_kernel<32>, grid, dim3(32 * 32), 0, stream, "generic_attention",
                  p);
  }
  return launch(generic_attention_kernel<4>, grid, dim3(32 * 4), 0, stream, "generic_attention", p);
}

}  // namespace kvrt::engine::cuda
