// Rotary embedding fused with the KV-cache write. For each token at position
// p = positions[t], read from device memory (one block per head of a token):
//   q heads: rotated in place inside qkv [tokens, (q_heads + 2 kv_heads) * head_dim]
//   k heads: rotated and written to k_cache[kv_head, p, :]
//   v heads: copied to v_cache[kv_head, p, :]
// HF's rotate_half convention: the pair (j, j + R/2) turns by p * inv_freq[j], R the
// rotary dims (head_dim, or fewer for partial rotary); dims R.. pass through.
#include "kvrt/engine/cuda/rope_common.cuh"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 64;

// grid (tokens, q_heads + kv_heads): one block per head of one token.
__global__ void __launch_bounds__(kThreads) rope_kv_write_kernel(const RopeKvWrite op) {
  pdl_launch_dependents();
  pdl_wait();
  const int pos = op.positions[blockIdx.x];
  if (pos < 0 || pos >= op.max_seq) return;
  // rotary_dim as the launcher resolved it (never 0).
  const int dim = op.head_dim, half = op.rotary_dim / 2, head = blockIdx.y;
  bf16* row = op.qkv + static_cast<size_t>(blockIdx.x) * (op.q_heads + 2 * op.kv_heads) * dim;
  const bf16* src = row + head * dim;
  const size_t cache_row =
      (static_cast<size_t>(head - op.q_heads) * op.max_seq + pos) * static_cast<size_t>(dim);
  bf16* dst = head < op.q_heads ? row + head * dim : op.k_cache + cache_row;
  for (int j = threadIdx.x; j < half; j += kThreads) {
    float cos_v, sin_v;
    rope_angle(pos, op.inv_freq[j], op.attention_scaling, &cos_v, &sin_v);
    bf16 out1, out2;
    rope_rotate(__bfloat162float(src[j]), __bfloat162float(src[j + half]), cos_v, sin_v, &out1,
                &out2);
    dst[j] = out1;  // both read before either is written: q may rotate in place
    dst[j + half] = out2;
  }
  if (head >= op.q_heads) {
    // The pass-through dims of k still go to the cache row (q keeps them where they are).
    for (int d = op.rotary_dim + threadIdx.x; d < dim; d += kThreads) dst[d] = src[d];
    const bf16* v = row + (op.q_heads + op.kv_heads + head - op.q_heads) * dim;
    for (int d = threadIdx.x; d < dim; d += kThreads) op.v_cache[cache_row + d] = v[d];
  }
}

}  // namespace

Status rope_kv_write(const RopeKvWrite& op, cudaStream_t stream) {
  if (op.qkv == nullptr || op.positions == nullptr || op.inv_freq == nullptr ||
      op.k_cache == nullptr || op.v_cache == nullptr) {
    return invalid_argument(
        "rope_kv_write: qkv, positions, inv_freq, k_cache and v_cache must be non-null");
  }
  if (op.tokens < 1 || op.q_heads < 1 || op.kv_heads < 1 || op.max_seq < 1) {
    return invalid_argument(
        "rope_kv_write: tokens, q_heads, kv_heads and max_seq must be positive");
  }
  if (op.head_dim < 2 || op.head_dim % 2 != 0) {
    return invalid_argument("rope_kv_write: head_dim must be positive and even, got ", op.head_dim);
  }
  if (op.rotary_dim < 0 || op.rotary_dim > op.head_dim || op.rotary_dim % 2 != 0) {
    return invalid_argument("rope_kv_write: rotary_dim must be 0 or even in [2, head_dim ",
                            op.head_dim, "], got ", op.rotary_dim);
  }
  RopeKvWrite p = op;
  p.rotary_dim = op.rotary_dim != 0 ? op.rotary_dim : op.head_dim;
  return launch(rope_kv_write_kernel, dim3(op.tokens, op.q_heads + op.kv_heads), dim3(kThreads), 0,
                stream, "rope_kv_write", p);
}

}  // namespace kvrt::engine::cuda
