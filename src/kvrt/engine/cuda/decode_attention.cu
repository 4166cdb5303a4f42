// Decode attention (one query per head, GQA, long cache): split-K flash-decoding.
//
//   grid (splits, kv_heads x head groups); block = 4 warps
//   block: the <= 16 query heads of one kv head (the MMA's M; rows past the group are
//          zero) against one slice of that head's cache, read once for the whole group
//   slice: [split * chunk, min((split + 1) * chunk, len)), chunk = len / splits rounded
//          up to 16 keys, with len = position[0] + 1 read on the device: one captured
//          graph serves every position, and the live part of the cache is spread over
//          all blocks whatever its length
//   tile:  64 keys in shared memory (cp.async, double-buffered); warp w takes keys
//          16w..16w+15 and keeps its own running softmax
//   end:   the 4 warps merge in shared memory; the block writes (max, sum, unnormalized
//          output) per head to the workspace; decode_attention_combine merges the splits
//          (all of them in parallel: a serial loop over splits cost ~10 us in L2 latency).
#include <algorithm>
#include <cmath>

#include "kvrt/engine/cuda/attention_common.cuh"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16;  // query heads per block
constexpr int kCombineThreads = 256;
constexpr int kChunkKeys = 16;  // slice granularity: one warp's keys of a tile

struct Params {
  const bf16* q;  // [q_heads, dim]
  const bf16* k;  // [kv_heads, max_seq, dim]
  const bf16* v;
  const int32_t* position;  // [1]
  float* part_o;            // [q_heads, splits, dim]
  float2* part_ml;          // [q_heads, splits]: (max in log2 units, sum)
  int group;                // q_heads / kv_heads
  int head_groups;          // ceil(group / 16)
  int max_seq;
  int splits;
  float scale_log2;
};

template <int kDim>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(kRows + 4 * kAttnTileKeys) * (kDim + 8) * sizeof(bf16);
}

template <int kDim>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(const Params p) {
  constexpr int kStride = kDim + 8, kChunks = kDim / 8;
  extern __shared__ uint4 decode_smem[];
  bf16* qs = reinterpret_cast<bf16*>(decode_smem);  // [16][kStride]
  bf16* ks = qs + kRows * kStride;                  // [2][64][kStride]
  bf16* vs = ks + 2 * kAttnTileKeys * kStride;      // [2][64][kStride]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.head_groups;
  const int first = (blockIdx.y % p.head_groups) * kRows;  // within the group
  const int head0 = kv_head * p.group + first;
  const int heads = min(kRows, p.group - first);

  pdl_launch_dependents();
  pdl_wait();

  const int pos = *p.position;
  const int len = pos < 0 ? 0 : min(pos + 1, p.max_seq);
  const int chunk = ceil_div(ceil_div(len, p.splits), kChunkKeys) * kChunkKeys;
  const int start = split * chunk;
  const int end = min(start + chunk, len);
  if (start >= end) {
    if (threadIdx.x < heads) {
      p.part_ml[(head0 + threadIdx.x) * p.splits + split] = make_float2(-INFINITY, 0.0f);
    }
    return;
  }

  const bf16* k_head = p.k + static_cast<size_t>(kv_head) * p.max_seq * kDim;
  const bf16* v_head = p.v + static_cast<size_t>(kv_head) * p.max_seq * kDim;
  load_kv_tile<kDim, kThreads>(ks, vs, k_head, v_head, start, end);
  cp_async_commit();
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i - r * kChunks;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < heads) {
      value = *reinterpret_cast<const uint4*>(p.q + static_cast<size_t>(head0 + r) * kDim + c * 8);
    }
    *reinterpret_cast<uint4*>(qs + r * kStride + c * 8) = value;
  }
  __syncthreads();
  uint32_t qf[kDim / 16][4];
  load_q_fragments<kDim>(qf, qs, kStride);

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kDim / 8][4] = {};
  const int tiles = ceil_div(end - start, kAttnTileKeys);
  for (int it = 0; it < tiles; ++it) {
    const int buffer = it & 1;
    if (it + 1 < tiles) {
      const int next = (it + 1) & 1;
      load_kv_tile<kDim, kThreads>(ks + next * kAttnTileKeys * kStride,
                                   vs + next * kAttnTileKeys * kStride, k_head, v_head,
                                   start + (it + 1) * kAttnTileKeys, end);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    const int row0 = buffer * kAttnTileKeys + warp * 16;
    float s[2][4];
    scores<kDim, 16>(s, qf, ks + row0 * kStride, kStride);
    const int key0 = start + it * kAttnTileKeys + warp * 16;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = key0 + n * 8 + 2 * t + (j & 1);
        s[n][j] = key < end ? s[n][j] * p.scale_log2 : -INFINITY;
      }
    }
    uint32_t pa[1][4];
    online_softmax<16, kDim>(s, m, l, o, pa);
    accumulate_pv<16, kDim>(o, pa, vs + row0 * kStride, kStride);
    __syncthreads();  // the next iteration's copies overwrite this buffer
  }
  reduce_row_sums(l);

  // Merge the 4 warps (the tiles' shared memory is free now; the loop ended on a barrier).
  float* merge_o = reinterpret_cast<float*>(ks);  // [4][16][kDim]
  float* merge_m = reinterpret_cast<float*>(qs);  // [4][16]
  float* merge_l = merge_m + kWarps * kRows;      // [4][16]
  if (t == 0) {
    merge_m[warp * kRows + g] = m[0];
    merge_m[warp * kRows + g + 8] = m[1];
    merge_l[warp * kRows + g] = l[0];
    merge_l[warp * kRows + g + 8] = l[1];
  }
#pragma unroll
  for (int d = 0; d < kDim / 8; ++d) {
    const int col = d * 8 + 2 * t;
    float* row_g = merge_o + (warp * kRows + g) * kDim + col;
    float* row_g8 = merge_o + (warp * kRows + g + 8) * kDim + col;
    row_g[0] = o[d][0];
    row_g[1] = o[d][1];
    row_g8[0] = o[d][2];
    row_g8[1] = o[d][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < heads * kDim; i += kThreads) {
    const int r = i / kDim, d = i - r * kDim;
    // Warp 0 saw key `start`, so the block maximum is finite.
    float block_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, merge_m[w * kRows + r]);
    float out = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float weight = exp2f(merge_m[w * kRows + r] - block_max);
      out += weight * merge_o[(w * kRows + r) * kDim + d];
      sum += weight * merge_l[w * kRows + r];
    }
    const size_t slot = static_cast<size_t>(head0 + r) * p.splits + split;
    p.part_o[slot * kDim + d] = out;
    if (d == 0) p.part_ml[slot] = make_float2(block_max, sum);
  }
}

// One block per query head: out[head] = sum_s w_s o_s / sum_s w_s l_s, w_s = 2^(m_s - M).
// Every split is handled in parallel: the (max, sum) pairs in one pass, then thread
// groups sum disjoint sets of splits per output element.
__global__ void __launch_bounds__(kCombineThreads)
    decode_attention_combine(const float* part_o, const float2* part_ml, bf16* out, int splits,
                             int dim) {
  extern __shared__ float combine_smem[];
  float* weight = combine_smem;            // [splits]
  float* partial = combine_smem + splits;  // [groups][dim]
  __shared__ float scratch[kCombineThreads / 32];
  pdl_launch_dependents();
  pdl_wait();
  const int head = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float2* ml = part_ml + static_cast<size_t>(head) * splits;

  float global_max = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += kCombineThreads) {
    const float2 v = ml[s];
    if (v.y > 0.0f) global_max = fmaxf(global_max, v.x);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    global_max = fmaxf(global_max, __shfl_xor_sync(0xffffffffu, global_max, offset));
  }
  if (lane == 0) scratch[warp] = global_max;
  __syncthreads();
  global_max = scratch[0];
#pragma unroll
  for (int w = 1; w < kCombineThreads / 32; ++w) global_max = fmaxf(global_max, scratch[w]);
  __syncthreads();  // scratch is reused below

  float sum = 0.0f;
  for (int s = threadIdx.x; s < splits; s += kCombineThreads) {
    const float2 v = ml[s];
    const float w = v.y > 0.0f ? exp2f(v.x - global_max) : 0.0f;
    weight[s] = w;
    sum += w * v.y;
  }
  sum = warp_sum(sum);
  if (lane == 0) scratch[warp] = sum;
  __syncthreads();  // also publishes weight[]
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kCombineThreads / 32; ++w) total += scratch[w];

  const int groups = kCombineThreads / dim;
  const int group = threadIdx.x / dim, d = threadIdx.x - group * dim;
  if (group < groups) {
    const float* o = part_o + static_cast<size_t>(head) * splits * dim + d;
    float acc = 0.0f;
#pragma unroll 4
    for (int s = group; s < splits; s += groups) {
      if (weight[s] > 0.0f) acc += weight[s] * o[static_cast<size_t>(s) * dim];
    }
    partial[group * dim + d] = acc;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < dim; e += kCombineThreads) {
    float acc = 0.0f;
    for (int gr = 0; gr < groups; ++gr) acc += partial[gr * dim + e];
    out[static_cast<size_t>(head) * dim + e] = __float2bfloat16(total > 0.0f ? acc / total : 0.0f);
  }
}

template <int kDim>
Status run(const DecodeAttention& op, const Params& p, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes<kDim>();
  const void* key = reinterpret_cast<const void*>(decode_attention_kernel<kDim>);
  KVRT_RETURN_IF_ERROR(allow_shared_memory(key, smem, "decode_attention"));
  const dim3 grid(p.splits, op.kv_heads * p.head_groups);
  KVRT_RETURN_IF_ERROR(launch(decode_attention_kernel<kDim>, grid, dim3(kThreads), smem, stream,
                              "decode_attention", p));
  const size_t combine_smem =
      (static_cast<size_t>(p.splits) + static_cast<size_t>(kCombineThreads)) * sizeof(float);
  KVRT_RETURN_IF_ERROR(allow_shared_memory(reinterpret_cast<const void*>(decode_attention_combine),
                                           combine_smem, "decode_attention_combine"));
  return launch(decode_attention_combine, dim3(op.q_heads), dim3(kCombineThreads), combine_smem,
                stream, "decode_attention_combine", static_cast<const float*>(p.part_o),
                static_cast<const float2*>(p.part_ml), op.out, p.splits, op.head_dim);
}

}  // namespace

Result<int> decode_attention_splits(int q_heads, int kv_heads, int max_seq) {
  if (q_heads < 1 || kv_heads < 1 || q_heads % kv_heads != 0 || max_seq < 1) {
    return invalid_argument("decode_attention_splits: need q_heads a positive multiple of ",
                            "kv_heads and max_seq > 0");
  }
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const int blocks_per_split = kv_heads * ceil_div(q_heads / kv_heads, kRows);
  const int splits = ceil_div(4 * sms, blocks_per_split);  // about 4 blocks per SM
  return std::max(1, std::min(splits, ceil_div(max_seq, kChunkKeys)));
}

size_t decode_attention_workspace_bytes(int q_heads, int head_dim, int splits) {
  if (q_heads < 1 || head_dim < 1 || splits < 1) return 0;
  const size_t slots = static_cast<size_t>(q_heads) * splits;
  return slots * head_dim * sizeof(float) + slots * sizeof(float2);
}

Status decode_attention(const DecodeAttention& op, cudaStream_t stream) {
  if (op.q == nullptr || op.k_cache == nullptr || op.v_cache == nullptr || op.position == nullptr ||
      op.out == nullptr || op.workspace == nullptr) {
    return invalid_argument(
        "decode_attention: q, k_cache, v_cache, position, out and workspace must be non-null");
  }
  if (op.q_heads < 1 || op.kv_heads < 1 || op.q_heads % op.kv_heads != 0) {
    return invalid_argument("decode_attention: q_heads (", op.q_heads,
                            ") must be a positive multiple of kv_heads (", op.kv_heads, ")");
  }
  if (op.max_seq < 1 || op.splits < 1) {
    return invalid_argument("decode_attention: max_seq and splits must be positive");
  }
  if (op.head_dim != 64 && op.head_dim != 80 && op.head_dim != 96 && op.head_dim != 128) {
    return not_supported("decode_attention: head_dim ", op.head_dim,
                         " (supported: 64, 80, 96, 128)");
  }
  if (op.workspace_bytes < decode_attention_workspace_bytes(op.q_heads, op.head_dim, op.splits)) {
    return invalid_argument("decode_attention: workspace_bytes ", op.workspace_bytes,
                            " is below decode_attention_workspace_bytes() = ",
                            decode_attention_workspace_bytes(op.q_heads, op.head_dim, op.splits));
  }
  if (!is_aligned(op.q, 16) || !is_aligned(op.k_cache, 16) || !is_aligned(op.v_cache, 16) ||
      !is_aligned(op.workspace, 16)) {
    return invalid_argument("decode_attention: q, caches and workspace must be 16-byte aligned");
  }
  Params p{};
  p.q = op.q;
  p.k = op.k_cache;
  p.v = op.v_cache;
  p.position = op.position;
  p.part_ml = reinterpret_cast<float2*>(op.workspace);
  p.part_o =
      op.workspace + 2 * static_cast<size_t>(op.q_heads) * op.splits;  // after the (max, sum) pairs
  p.group = op.q_heads / op.kv_heads;
  p.head_groups = ceil_div(p.group, kRows);
  p.max_seq = op.max_seq;
  p.splits = op.splits;
  const float scale =
      op.scale > 0.0f ? op.scale : 1.0f / std::sqrt(static_cast<float>(op.head_dim));
  p.scale_log2 = scale * 1.4426950408889634f;
  switch (op.head_dim) {
    case 64:
      return run<64>(op, p, stream);
    case 80:
      return run<80>(op, p, stream);
    case 96:
      return run<96>(op, p, stream);
    default:
      return run<128>(op, p, stream);
  }
}

}  // namespace kvrt::engine::cuda
