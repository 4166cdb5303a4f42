// The steps of a decode_attention block outside its tile loop (decode_attention.cu):
// the launch parameters, the slice of the live cache a split reduces, loading the query
// and the new K/V row (rotated on the way when rope is fused), placing the new row, and
// the cross-split merge that the last block of a head group runs.
#pragma once

#include <cmath>
#include <cstdint>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/rope_common.cuh"

namespace kvrt::engine::cuda::detail::decode_attention {

constexpr int kRows = 16;        // query heads per block
constexpr int kChunkKeys = 16;   // slice granularity: one warp's keys of a tile
constexpr int kMaxSplits = 512;  // bounds the workspace and the last block's walk

struct Params {
  const bf16* q;  // [q_heads, dim], or the fused qkv row with rope
  bf16* k;        // [kv_heads, max_seq, dim]
  bf16* v;
  const int32_t* position;  // [1]
  bf16* out;                // [q_heads, dim]
  unsigned* counters;       // [kv_heads x head groups]: blocks done, wraps to 0
  float* part_o;            // [q_heads, splits, dim]
  float2* part_ml;          // [q_heads, splits]: (max in log2 units, sum)
  int group;                // q_heads / kv_heads
  int head_groups;          // ceil(group / 16)
  int max_seq;
  int splits;      // the grid's: the most a step uses
  int min_splits;  // the fewest a step uses (active_splits)
  int wide_keys;   // keys a block scores in one pass (0: the geometry has no such pass)
  float scale_log2;
  const float* rope_inv_freq;  // null: q and the new row are rotated and written already
  float rope_scaling;
  int q_heads, kv_heads;
  bool prefetch_history;  // read position and rows < position before the PDL wait
  bool early_dependents;  // let the next kernel launch once the prefetch is issued
};

__device__ __forceinline__ int live_keys(const Params& p, int pos) {
  return pos < 0 ? 0 : min(pos + 1, p.max_seq);
}

// The splits this step uses, from the live length on the device (one captured graph
// serves every position): min_splits while their slices fit one pass (wide_keys), then
// as many as keep them there, up to the grid's; past that min_splits again, whose longer
// slices run tile by tile as they would on a grid of min_splits. Without this, a length
// just past min_splits x wide_keys (4097 keys on 16 splits of 256) took the tile path on
// every block: +1 us per layer. The blocks of the splits past the step's wait for none.
__device__ __forceinline__ int active_splits(const Params& p, int len) {
  if (p.min_splits >= p.splits || p.wide_keys == 0) return p.splits;
  const int wide = ceil_div(len, p.wide_keys);
  return wide <= p.min_splits || wide > p.splits ? p.min_splits : wide;
}

// The slice [*start, *end) of the live cache that `split` (of `active`) reduces.
__device__ __forceinline__ void slice(const Params& p, int pos, int active, int split, int* start,
                                      int* end) {
  const int len = live_keys(p, pos);
  const int chunk = ceil_div(ceil_div(len, active), kChunkKeys) * kChunkKeys;
  *start = min(split * chunk, len);
  *end = min(*start + chunk, len);
}

// Copies the block's query rows (zero past `heads`) and, when `k_src` is set, the new K
// and V rows into the padded shared-memory rows [16 query rows][new K][new V] at `dst`,
// with every load issued before any store: one trip to L2. (Copied one after the other,
// each copy's loads waited for the previous copy's stores, which the compiler could not
// prove apart from them: the blocks holding the new row took two more trips and were
// the last of their head group to finish.) Plain loads: the rows may come from the
// kernel just before, after the PDL wait.
template <int kDim, int kThreads>
__device__ __forceinline__ void load_query_and_new_row(bf16* dst, const bf16* q, int heads,
                                                       const bf16* k_src, const bf16* v_src) {
  constexpr int kStride = kDim + 8, kChunks = kDim / 8;
  constexpr int kItems = (kRows + 2) * kChunks;
  constexpr int kPerThread = (kItems + kThreads - 1) / kThreads;
  uint4 value[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    const int r = i / kChunks, c = i - r * kChunks;
    const bf16* src = r < heads          ? q + static_cast<size_t>(r) * kDim
                      : r < kRows        ? nullptr
                      : k_src == nullptr ? nullptr
                      : r == kRows       ? k_src
                                         : v_src;
    value[j] = i < kItems && src != nullptr ? *reinterpret_cast<const uint4*>(src + c * 8)
                                            : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    const int r = i / kChunks, c = i - r * kChunks;
    if (i < kItems) *reinterpret_cast<uint4*>(dst + r * kStride + c * 8) = value[j];
  }
}

// Copies the new K/V row from its staging rows in shared memory to `k_row` and `v_row`:
// its place in a tile, as the slice's last key (scored and merged with the history), or,
// with rope fused, the cache.
template <int kDim, int kThreads>
__device__ __forceinline__ void copy_new_row(bf16* k_row, bf16* v_row, const bf16* k_new,
                                             const bf16* v_new) {
  constexpr int kChunks = kDim / 8;
  for (int i = threadIdx.x; i < 2 * kChunks; i += kThreads) {
    const int c = i % kChunks;
    *reinterpret_cast<uint4*>((i < kChunks ? k_row : v_row) + c * 8) =
        *reinterpret_cast<const uint4*>((i < kChunks ? k_new : v_new) + c * 8);
  }
}

// Fused rope: as load_query_and_new_row, but each thread loads the two chunks of a row
// that rope pairs (c and c + kDim / 16: elements j and j + kDim / 2) and turns them with
// the angles in `cs` before storing them, so the rows land rotated: no barrier and no
// pass over shared memory between the load and the rotated rows. The new v row is copied
// as it is.
template <int kDim, int kThreads>
__device__ __forceinline__ void load_rotated_query_and_new_row(bf16* dst, const bf16* q, int heads,
                                                               const bf16* k_src, const bf16* v_src,
                                                               const float* cs) {
  constexpr int kStride = kDim + 8, kChunks = kDim / 8, kPairs = kChunks / 2;
  constexpr int kRotated = (kRows + 1) * kPairs;  // 16 query rows and the new k, by pairs
  constexpr int kItems = kRotated + kChunks;      // then the new v, by chunks
  constexpr int kPerThread = (kItems + kThreads - 1) / kThreads;
  uint4 first[kPerThread], second[kPerThread];
#pragma unroll
  for (int n = 0; n < kPerThread; ++n) {
    const int i = static_cast<int>(threadIdx.x) + n * kThreads;
    const int r = i / kPairs, c = i - r * kPairs;
    const bf16* src = i >= kRotated ? (i < kItems ? v_src : nullptr)
                      : r < heads   ? q + static_cast<size_t>(r) * kDim
                      : r == kRows  ? k_src
                                    : nullptr;
    const int chunk = i >= kRotated ? i - kRotated : c;
    first[n] =
        src != nullptr ? *reinterpret_cast<const uint4*>(src + chunk * 8) : make_uint4(0, 0, 0, 0);
    second[n] = src != nullptr && i < kRotated
                    ? *reinterpret_cast<const uint4*>(src + (c + kPairs) * 8)
                    : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int n = 0; n < kPerThread; ++n) {
    const int i = static_cast<int>(threadIdx.x) + n * kThreads;
    if (i >= kItems) continue;
    if (i >= kRotated) {
      *reinterpret_cast<uint4*>(dst + (kRows + 1) * kStride + (i - kRotated) * 8) = first[n];
      continue;
    }
    const int r = i / kPairs, c = i - r * kPairs;
    uint32_t* a = &first[n].x;
    uint32_t* b = &second[n].x;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int j = c * 8 + 2 * w;
      bf16 a0, a1, b0, b1;
      rope_rotate(bf16_lo(a[w]), bf16_lo(b[w]), cs[j], cs[kDim / 2 + j], &a0, &b0);
      rope_rotate(bf16_hi(a[w]), bf16_hi(b[w]), cs[j + 1], cs[kDim / 2 + j + 1], &a1, &b1);
      a[w] = __bfloat16_as_ushort(a0) | (static_cast<uint32_t>(__bfloat16_as_ushort(a1)) << 16);
      b[w] = __bfloat16_as_ushort(b0) | (static_cast<uint32_t>(__bfloat16_as_ushort(b1)) << 16);
    }
    *reinterpret_cast<uint4*>(dst + r * kStride + c * 8) = first[n];
    *reinterpret_cast<uint4*>(dst + r * kStride + (c + kPairs) * 8) = second[n];
  }
}

// atomicInc at GPU scope with acquire-release ordering: returns the old value, stores
// old + 1, or 0 once old reached `limit`.
__device__ __forceinline__ unsigned atomic_inc_acq_rel(unsigned* counter, int limit) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(counter), "r"(static_cast<unsigned>(limit))
               : "memory");
  return old;
}

// Two partial softmaxes (max in log2 units, sum, unnormalized output) as one; a side
// with max -inf (nothing merged yet) weighs nothing, also when both have it.
__device__ __forceinline__ void combine_partials(float& m, float& l, float4& o, float m2, float l2,
                                                 float4 o2) {
  const float mm = fmaxf(m, m2);
  const float w1 = m == -INFINITY ? 0.0f : exp2f(m - mm);
  const float w2 = m2 == -INFINITY ? 0.0f : exp2f(m2 - mm);
  m = mm;
  l = l * w1 + l2 * w2;
  o = make_float4(o.x * w1 + o2.x * w2, o.y * w1 + o2.y * w2, o.z * w1 + o2.z * w2,
                  o.w * w1 + o2.w * w2);
}

// The last block's merge of the step's `active` splits (slots strided by the grid's
// splits). An item is (head, 4 output columns); `lanes` adjacent threads share an item
// when the block has threads to spare (up to 4, while the splits need more than one
// batch each), each taking every lanes-th batch of 16 splits, and meet by shuffles: 17-64
// splits cost one trip to L2, not two to four. A thread walks its batches loading 16
// splits' (max, sum) and partial outputs at once, one round trip to L2 per batch
// (TinyLlama at 4096 keys: 7.4 -> 6.6 us against loading the maxima first, then the
// outputs in two batches), merging each batch into a running softmax; an empty split
// (max -inf, sum 0) weighs nothing.
template <int kDim, int kThreads>
__device__ __forceinline__ void merge_splits(const Params& p, int active, int head0, int heads) {
  constexpr int kBatch = 16, kColumns = kDim / 4;
  constexpr int kMaxLanes = kDim == 80 ? 1 : 4;  // at 80 the 8-warp kernel spilled with them
  const int items = heads * kColumns;
  int lanes = 1;
  while (lanes < kMaxLanes && 2 * lanes * items <= kThreads && active > lanes * kBatch) lanes *= 2;
  // Every thread runs the same rounds (the shuffles need whole warps).
  const int rounds = ceil_div(items * lanes, kThreads);
  for (int round = 0; round < rounds; ++round) {
    const int at = round * kThreads + static_cast<int>(threadIdx.x);
    const int item = at / lanes, part = at % lanes;
    const bool valid = item < items;
    const int r = valid ? item / kColumns : 0, d4 = valid ? item - r * kColumns : 0;
    const size_t first_slot = static_cast<size_t>(head0 + r) * p.splits;
    const float2* ml = p.part_ml + first_slot;
    const float4* o = reinterpret_cast<const float4*>(p.part_o) + first_slot * kColumns + d4;
    float running_max = -INFINITY, total = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s0 = part * kBatch; valid && s0 < active; s0 += lanes * kBatch) {
      float2 split_ml[kBatch];
      float4 split_o[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const bool live = s0 + k < active;
        split_ml[k] = live ? __ldcg(ml + s0 + k) : make_float2(-INFINITY, 0.0f);
        split_o[k] = live ? __ldcg(o + static_cast<size_t>(s0 + k) * kColumns)
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      // An empty split (and a missing one) has max -inf, sum 0 and zero outputs, so its
      // weight exp2(-inf) is 0 without a test; the maxima meet in a tree, not a chain.
      static_assert(kBatch == 16);
      float half[8], quarter[4];
#pragma unroll
      for (int k = 0; k < 8; ++k) half[k] = fmaxf(split_ml[k].x, split_ml[k + 8].x);
#pragma unroll
      for (int k = 0; k < 4; ++k) quarter[k] = fmaxf(half[k], half[k + 4]);
      const float batch_max =
          fmaxf(fmaxf(running_max, fmaxf(quarter[0], quarter[2])), fmaxf(quarter[1], quarter[3]));
      if (batch_max == -INFINITY) continue;                  // only empty splits so far
      const float rescale = exp2f(running_max - batch_max);  // 0 while nothing merged
      total *= rescale;
      acc = make_float4(acc.x * rescale, acc.y * rescale, acc.z * rescale, acc.w * rescale);
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const float w = exp2f(split_ml[k].x - batch_max);
        total += w * split_ml[k].y;
        acc.x += w * split_o[k].x;
        acc.y += w * split_o[k].y;
        acc.z += w * split_o[k].z;
        acc.w += w * split_o[k].w;
      }
      running_max = batch_max;
    }
    for (int offset = 1; offset < lanes; offset <<= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, running_max, offset);
      const float l2 = __shfl_xor_sync(0xffffffffu, total, offset);
      const float4 o2 = make_float4(
          __shfl_xor_sync(0xffffffffu, acc.x, offset), __shfl_xor_sync(0xffffffffu, acc.y, offset),
          __shfl_xor_sync(0xffffffffu, acc.z, offset), __shfl_xor_sync(0xffffffffu, acc.w, offset));
      combine_partials(running_max, total, acc, m2, l2, o2);
    }
    if (!valid || part != 0) continue;
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    bf16* out = p.out + static_cast<size_t>(head0 + r) * kDim + d4 * 4;
    *reinterpret_cast<uint2*>(out) =
        make_uint2(pack_bf16(acc.x * inv, acc.y * inv), pack_bf16(acc.z * inv, acc.w * inv));
  }
}

}  // namespace kvrt::engine::cuda::detail::decode_attention
