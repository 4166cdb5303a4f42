// Prefill attention: causal, many queries, FlashAttention-2 tiling on tensor cores.
//
//   grid (ceil(tokens / 64), q_heads), the latest query tiles first
//   block: 64 queries of one head (Q tile in shared memory, A fragments from it); four
//          row groups of 16 queries, each owned by one warp, or (head_dim 64) by two
//          warps w and w + 4 that take the two halves of every key tile, each with a
//          running softmax of its own
//   loop:  64-key (two warps a row group: 128-key) K/V tiles of the head's kv head from
//          the cache (cp.async, double-buffered) up to the block's largest position;
//          per warp and 64 keys: S = Q·Kᵀ (mma.sync bf16), mask key > position[query],
//          online softmax, O += P·V
//   end:   warps w + 4 hand (max, sum, O) to warps w through shared memory, in the
//          layout of their registers; O / l, bf16, into out[token, head, :]
// Two warps a row group halve a block's serial chain of tiles: at a few hundred tokens
// there are too few row groups (tokens / 16 x heads) to hide one warp's latency.
// Positions are read from device memory; the cache already holds rows [0, position]
// (rope_kv_write ran first), so chunked prefill after earlier tokens works unchanged.
#include <cmath>

#include "kvrt/engine/cuda/attention_common.cuh"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;

constexpr int kTileQueries = 64;  // 4 row groups of 16

// kHalves warps per row group, each over its own 64 keys of every tile.
template <int kDim, int kHalves>
struct Geometry {
  static constexpr int kThreads = 4 * kHalves * 32;
  static constexpr int kTileKeys = kHalves * kAttnTileKeys;
  static constexpr size_t kSmem =
      static_cast<size_t>(kTileQueries + 4 * kTileKeys) * (kDim + 8) * sizeof(bf16);
  // Two 8-warp blocks per multiprocessor at head_dim 64 (<= 128 registers a thread); 0
  // leaves the 4-warp kernels unbounded (1 made ptxas give them 13-38 registers more,
  // a block per multiprocessor fewer at head_dim 80 and 96).
  static constexpr int kMinBlocks = kHalves == 2 && kDim <= 64 ? 2 : 0;
};

struct Params {
  const bf16* q;
  int64_t q_stride;  // elements between tokens
  const bf16* k;     // [kv_heads, max_seq, dim]
  const bf16* v;
  const int32_t* positions;  // [tokens]
  bf16* out;                 // [tokens, q_heads, dim]
  int tokens;
  int q_heads;
  int group;
  int max_seq;
  float scale_log2;
};

// The key halves meet: warp w + 4 stores its state where lane i of warp w, which holds
// the same rows and columns, reads it (consecutive lanes, consecutive words), and warp w
// merges it into its own. `handoff` is the K/V tiles' shared memory.
template <int kDim, int kTileKeys>
__device__ __forceinline__ void merge_key_halves(float* handoff, int warp, int half, float (&m)[2],
                                                 float (&l)[2], float (&o)[kDim / 8][4]) {
  constexpr int kFields = 4 + kDim / 2;  // m[2], l[2], o[kDim / 8][4]
  static_assert(kFields * 128 * sizeof(float) <= 4 * kTileKeys * (kDim + 8) * sizeof(bf16));
  const int slot = warp * 32 + (threadIdx.x & 31);
  __syncthreads();  // every warp is done with the tiles
  if (half == 1) {
    handoff[0 * 128 + slot] = m[0];
    handoff[1 * 128 + slot] = m[1];
    handoff[2 * 128 + slot] = l[0];
    handoff[3 * 128 + slot] = l[1];
#pragma unroll
    for (int d = 0; d < kDim / 8; ++d) {
#pragma unroll
      for (int j = 0; j < 4; ++j) handoff[(4 + d * 4 + j) * 128 + slot] = o[d][j];
    }
  }
  __syncthreads();
  if (half == 1) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_other = handoff[r * 128 + slot], l_other = handoff[(2 + r) * 128 + slot];
    const float m_both = fmaxf(m[r], m_other);
    // A row with no key in either half keeps m = -inf: weights 0, not NaN.
    const float base = m_both == -INFINITY ? 0.0f : m_both;
    const float mine = exp2f(m[r] - base), other = exp2f(m_other - base);
    l[r] = l[r] * mine + l_other * other;
#pragma unroll
    for (int d = 0; d < kDim / 8; ++d) {
#pragma unroll
      for (int j = 2 * r; j < 2 * r + 2; ++j) {
        o[d][j] = o[d][j] * mine + handoff[(4 + d * 4 + j) * 128 + slot] * other;
      }
    }
  }
}

template <int kDim, int kHalves>
__global__ void __launch_bounds__(Geometry<kDim, kHalves>::kThreads,
                                  Geometry<kDim, kHalves>::kMinBlocks)
    prefill_attention_kernel(const Params p) {
  using G = Geometry<kDim, kHalves>;
  constexpr int kThreads = G::kThreads, kTileKeys = G::kTileKeys;
  constexpr int kStride = kDim + 8, kChunks = kDim / 8;
  extern __shared__ uint4 prefill_smem[];
  bf16* qs = reinterpret_cast<bf16*>(prefill_smem);  // [64][kStride]
  bf16* ks = qs + kTileQueries * kStride;            // [2][kTileKeys][kStride]
  bf16* vs = ks + 2 * kTileKeys * kStride;           // [2][kTileKeys][kStride]
  __shared__ int block_max_pos;

  const int lane = threadIdx.x & 31;
  const int warp = (threadIdx.x >> 5) & 3;               // row group
  const int half = kHalves == 2 ? threadIdx.x >> 7 : 0;  // key half
  const int g = lane >> 2, t = lane & 3;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileQueries;
  const int head = blockIdx.y, kv_head = head / p.group;

  pdl_wait();

  // A query at a position past the cache sees the whole cache; a negative position
  // (or a padding row past `tokens`) sees nothing and yields zeros.
  auto position_of = [&](int row) {
    return row < p.tokens ? min(p.positions[row], p.max_seq - 1) : -1;
  };
  const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;
  const int pos_a = position_of(row_a), pos_b = position_of(row_b);
  int warp_max_pos = max(pos_a, pos_b);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    warp_max_pos = max(warp_max_pos, __shfl_xor_sync(0xffffffffu, warp_max_pos, offset));
  }
  if (threadIdx.x == 0) block_max_pos = -1;
  __syncthreads();
  if (lane == 0) atomicMax(&block_max_pos, warp_max_pos);

  for (int i = threadIdx.x; i < kTileQueries * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i - r * kChunks;
    const int row = q0 + r;
    const bool valid = row < p.tokens;
    const bf16* src = p.q + static_cast<int64_t>(valid ? row : 0) * p.q_stride +
                      static_cast<int64_t>(head) * kDim + c * 8;
    cp_async_16(qs + r * kStride + c * 8, src, valid);
  }
  cp_async_commit();
  __syncthreads();  // block_max_pos is final
  const int key_end = block_max_pos + 1;
  const int tiles = ceil_div(key_end, kTileKeys);

  const bf16* k_head = p.k + static_cast<size_t>(kv_head) * p.max_seq * kDim;
  const bf16* v_head = p.v + static_cast<size_t>(kv_head) * p.max_seq * kDim;
  if (tiles > 0) load_kv_tile<kDim, kThreads, kTileKeys>(ks, vs, k_head, v_head, 0, key_end);
  cp_async_commit();
  cp_async_wait<1>();  // the Q tile
  __syncthreads();

  // One warp a row group keeps Q's fragments in registers across the loop; two load them
  // for each tile, or their registers would not fit two blocks per multiprocessor.
  uint32_t qf[kDim / 16][4];
  if constexpr (kHalves == 1) load_q_fragments<kDim>(qf, qs + warp * 16 * kStride, kStride);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kDim / 8][4] = {};
  for (int it = 0; it < tiles; ++it) {
    const int buffer = it & 1;
    if (it + 1 < tiles) {
      const int next = (it + 1) & 1;
      load_kv_tile<kDim, kThreads, kTileKeys>(ks + next * kTileKeys * kStride,
                                              vs + next * kTileKeys * kStride, k_head, v_head,
                                              (it + 1) * kTileKeys, key_end);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    const int key0 = it * kTileKeys + half * kAttnTileKeys;
    if (key0 <= warp_max_pos) {  // else every key of the half is in this warp's future
      const size_t rows =
          (static_cast<size_t>(buffer) * kTileKeys + half * kAttnTileKeys) * kStride;
      const bf16* k_rows = ks + rows;
      const bf16* v_rows = vs + rows;
      float s[kAttnTileKeys / 8][4];
      if constexpr (kHalves == 2) load_q_fragments<kDim>(qf, qs + warp * 16 * kStride, kStride);
      scores<kDim, kAttnTileKeys>(s, qf, k_rows, kStride);
#pragma unroll
      for (int n = 0; n < kAttnTileKeys / 8; ++n) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int key = key0 + n * 8 + 2 * t + (j & 1);
          const int limit = j < 2 ? pos_a : pos_b;
          s[n][j] = key <= limit ? s[n][j] * p.scale_log2 : -INFINITY;
        }
      }
      uint32_t pa[kAttnTileKeys / 16][4];
      online_softmax<kAttnTileKeys, kDim>(s, m, l, o, pa);
      accumulate_pv<kAttnTileKeys, kDim>(o, pa, v_rows, kStride);
    }
    __syncthreads();  // the next iteration's copies overwrite this buffer
  }
  cp_async_wait<0>();
  // Only now may the next kernel's blocks take SM slots. Let in at entry, a chain of these
  // launches ran slower with PDL than without it (TinyLlama at 512 tokens 20.4-20.7
  // against 17.0-17.9 us); let in here, 16.9-17.1.
  pdl_launch_dependents();
  reduce_row_sums(l);

  if constexpr (kHalves == 2) {
    merge_key_halves<kDim, kTileKeys>(reinterpret_cast<float*>(ks), warp, half, m, l, o);
    if (half == 1) return;
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = r == 0 ? row_a : row_b;
    if (row >= p.tokens) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    bf16* dst = p.out + (static_cast<size_t>(row) * p.q_heads + head) * kDim;
#pragma unroll
    for (int d = 0; d < kDim / 8; ++d) {
      *reinterpret_cast<uint32_t*>(dst + d * 8 + 2 * t) =
          pack_bf16(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
    }
  }
}

// Two warps a row group at head_dim 64, where two such blocks fit a multiprocessor;
// larger head_dims keep one (their 8-warp blocks would run one per multiprocessor).
template <int kDim>
Status run(const PrefillAttention& op, const Params& p, cudaStream_t stream) {
  constexpr int kHalves = kDim == 64 ? 2 : 1;
  using G = Geometry<kDim, kHalves>;
  const void* key = reinterpret_cast<const void*>(prefill_attention_kernel<kDim, kHalves>);
  KVRT_RETURN_IF_ERROR(allow_shared_memory(key, G::kSmem, "prefill_attention"));
  const dim3 grid(ceil_div(op.tokens, kTileQueries), op.q_heads);
  return launch(prefill_attention_kernel<kDim, kHalves>, grid, dim3(G::kThreads), G::kSmem, stream,
                "prefill_attention", p);
}

}  // namespace

Status prefill_attention(const PrefillAttention& op, cudaStream_t stream) {
  if (op.q == nullptr || op.k_cache == nullptr || op.v_cache == nullptr ||
      op.positions == nullptr || op.out == nullptr) {
    return invalid_argument(
        "prefill_attention: q, k_cache, v_cache, positions and out must be non-null");
  }
  if (op.tokens < 1 || op.max_seq < 1) {
    return invalid_argument("prefill_attention: tokens and max_seq must be positive");
  }
  if (op.q_heads < 1 || op.kv_heads < 1 || op.q_heads % op.kv_heads != 0) {
    return invalid_argument("prefill_attention: q_heads (", op.q_heads,
                            ") must be a positive multiple of kv_heads (", op.kv_heads, ")");
  }
  const int64_t q_stride =
      op.q_token_stride != 0 ? op.q_token_stride : static_cast<int64_t>(op.q_heads) * op.head_dim;
  if (q_stride < static_cast<int64_t>(op.q_heads) * op.head_dim || q_stride % 8 != 0) {
    return invalid_argument("prefill_attention: q_token_stride ", q_stride,
                            " must be a multiple of 8 and at least q_heads * head_dim");
  }
  if (!is_aligned(op.q, 16) || !is_aligned(op.k_cache, 16) || !is_aligned(op.v_cache, 16) ||
      !is_aligned(op.out, 4)) {
    return invalid_argument("prefill_attention: q and caches must be 16-byte aligned, out 4-byte");
  }
  Params p{};
  p.q = op.q;
  p.q_stride = q_stride;
  p.k = op.k_cache;
  p.v = op.v_cache;
  p.positions = op.positions;
  p.out = op.out;
  p.tokens = op.tokens;
  p.q_heads = op.q_heads;
  p.group = op.q_heads / op.kv_heads;
  p.max_seq = op.max_seq;
  p.scale_log2 = attention_scale_log2(op.scale, op.head_dim);
  switch (op.head_dim) {
    case 64:
      return run<64>(op, p, stream);
    case 80:
      return run<80>(op, p, stream);
    case 96:
      return run<96>(op, p, stream);
    case 128:
      return run<128>(op, p, stream);
    default:
      return not_supported("prefill_attention: head_dim ", op.head_dim,
                           " (supported: 64, 80, 96, 128)");
  }
}

}  // namespace kvrt::engine::cuda
