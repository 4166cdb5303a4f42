// Decode attention (one query per head, GQA, long cache): split-K flash-decoding in one
// kernel.
//
//   grid (splits, kv_heads x head groups); block = 8 warps (at head_dim 96, and at 128
//          where one block per SM would not hold the grid in one wave, 4)
//   block: the <= 16 query heads of one kv head (the MMA's M; rows past the group are
//          zero) against one slice of that head's cache, read once for the whole group
//   slice: [split * chunk, min((split + 1) * chunk, len)), chunk = len / splits rounded
//          up to 16 keys, with len = position[0] + 1 read on the device: one captured
//          graph serves every position, and the live part of the cache is spread over
//          all blocks whatever its length
//   history: the rows before the position were written by earlier steps, so (unless the
//          caller says otherwise) the first kStages tiles of them are copied before the
//          PDL wait, while the kernels ahead in the stream still run; only the query and
//          the new row (this step's cache write) are read after it, the new row into
//          its place in the tiles, where it is scored as the slice's last key
//   tile:  16 keys per warp in shared memory, a ring of kStages tiles filled by cp.async;
//          warp w takes keys 16w..16w+15 and keeps its own running softmax (a history
//          that fits the ring at once is scored in one pass, 32 keys per warp)
//   rope:  optionally fused (rope_inv_freq set): q and the new k arrive unrotated in the
//          fused qkv row; the block rotates them as it loads them and the block that
//          holds the position writes the new K/V row to the cache, as rope_kv_write would
//   end:   the warps merge in shared memory. With one split the block
//          writes the output; otherwise it writes (max, sum, unnormalized output) per
//          head and counts itself done on a per-group counter in the workspace, and the
//          last block of the group merges every split (the counter wraps back to zero);
//          an empty slice writes sum 0 and zero outputs, so the merge reads no stale data
#include <algorithm>
#include <cmath>

#include "kvrt/engine/cuda/attention_common.cuh"
#include "kvrt/engine/cuda/decode_attention_steps.cuh"
#include "kvrt/engine/cuda/launch.h"
#include "kvrt/engine/cuda/rope_common.cuh"
#include "kvrt/engine/cuda/tuning.h"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;
using namespace detail::decode_attention;

// The tile copies as straight-line code up to head_dim 64 (4 rows per thread and tile).
// At 128 (8 rows) they made rope-fused attention slower (Llama-3.2-3B at 4096 keys 7.88
// -> 8.13 us, its step +0.9%); as a loop, 7.84-7.87 us and the step 0.3% faster.
template <int kDim>
constexpr bool kUnrolledCopies = kDim <= 64;

// Warps per block (each takes 16 keys of a tile) and the tile ring's depth. 8 warps over
// 128-key tiles, 2 deep: the 256 keys a block holds at 4096 tokens land at once and are
// scored in one pass; up to head_dim 96 two such blocks (of this launch and the next) fit
// on a multiprocessor, at 128 one. 4 warps over 64-key tiles, 3 deep: two blocks at every
// head_dim (run() picks).
template <int kDim, int kWarpCount>
struct Geometry {
  static constexpr int kWarps = kWarpCount;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kTileKeys = kWarps * 16;
  static constexpr int kStages = kWarps == 8 ? 2 : 3;
  // [16 query rows][new K row][new V row][kStages K tiles][kStages V tiles], padded rows.
  static constexpr size_t kSmem =
      static_cast<size_t>(kRows + 2 + 2 * kStages * kTileKeys) * (kDim + 8) * sizeof(bf16);
  // Blocks per multiprocessor the registers are budgeted for: two where their shared
  // memory (with ~2 KiB of static arrays and the 1 KiB reserved per block) fits twice.
  static constexpr int kMinBlocks = 2 * (kSmem + 3 * 1024) <= 228 * 1024 ? 2 : 1;
};

// Two blocks per multiprocessor (this launch's and the next) where their shared memory
// allows: caps the registers that the merge's loads in flight would otherwise raise past
// what two blocks can hold.
template <int kDim, int kWarpCount>
__global__ void __launch_bounds__(Geometry<kDim, kWarpCount>::kThreads,
                                  Geometry<kDim, kWarpCount>::kMinBlocks)
    decode_attention_kernel(const Params p) {
  using G = Geometry<kDim, kWarpCount>;
  constexpr int kWarps = G::kWarps, kThreads = G::kThreads, kTileKeys = G::kTileKeys;
  constexpr int kStride = kDim + 8, kStages = G::kStages;
  constexpr int kTileElems = kTileKeys * kStride;
  // The one-pass path's keys per warp; with 8 warps only, whose accumulators leave room
  // for twice the scores.
  constexpr bool kWide = kWarps == 8;
  constexpr int kWideKeys = kStages * kTileKeys / kWarps;
  // The warps' partials reuse the K tiles, their maxima and sums the query rows. Partial
  // rows are padded to kDim + 8 floats (8 or 24 mod 32 banks at every head_dim), so
  // the float2 stores of a warp's 8 row groups fall in distinct banks; unpadded, the
  // 8 rows of a store shared one bank group (8-way conflicts on 32 stores per lane).
  constexpr int kMergeStride = kDim + 8;
  static_assert(kWarps * kRows * kMergeStride * sizeof(float) <=
                kStages * kTileElems * sizeof(bf16));
  static_assert(2 * kWarps * kRows * sizeof(float) <= kRows * kStride * sizeof(bf16));
  extern __shared__ uint4 decode_smem[];
  bf16* qs = reinterpret_cast<bf16*>(decode_smem);  // [16][kStride]
  bf16* k_new = qs + kRows * kStride;               // [kStride]
  bf16* v_new = k_new + kStride;                    // [kStride]
  bf16* ks = v_new + kStride;                       // [kStages][kTileKeys][kStride]
  bf16* vs = ks + kStages * kTileElems;             // [kStages][kTileKeys][kStride]
  __shared__ float rope_cs[kDim];                   // cos [0, kDim/2), sin [kDim/2, kDim)
  __shared__ bool last_block;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.head_groups;
  const int first = (blockIdx.y % p.head_groups) * kRows;  // within the group
  const int head0 = kv_head * p.group + first;
  const int heads = min(kRows, p.group - first);
  bf16* k_head = p.k + static_cast<size_t>(kv_head) * p.max_seq * kDim;
  bf16* v_head = p.v + static_cast<size_t>(kv_head) * p.max_seq * kDim;

  // The inverse frequencies are constant, so they load in the position's trip to memory;
  // loaded where the angles need them they took a second trip before the PDL wait.
  static_assert(kDim / 2 <= kThreads);
  const bool angle_lane = p.rope_inv_freq != nullptr && threadIdx.x < kDim / 2;
  const float inv_freq = angle_lane ? __ldg(p.rope_inv_freq + threadIdx.x) : 0.0f;
  if (!p.prefetch_history) pdl_wait();
  const int pos = *p.position;
  const int active = active_splits(p, live_keys(p, pos));
  if (split >= active) return;  // counted by none: the step's counter wraps at `active`
  int start, end;
  slice(p, pos, active, split, &start, &end);
  // The row at `pos`, when it lies in this slice (and in the cache), is the one this step
  // wrote: the slice's last key. The copies of the history leave it out (skip_key), and
  // the tile it lies in (new_tile) gets it from the new row after the wait.
  const bool has_new = pos >= start && pos < end;
  const int skip_key = has_new ? pos : -1;
  const int tiles = end > start ? ceil_div(end - start, kTileKeys) : 0;
  const int new_tile = has_new ? (pos - start) / kTileKeys : -1;
  // A history that fits the ring at once is scored in one pass (kWideKeys per warp)
  // rather than tile by tile: fewer barriers, independent MMA chains.
  const bool wide = kWide && tiles > 0 && tiles <= kStages;
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    if (s < tiles) {
      load_kv_tile<kDim, kThreads, kTileKeys, kUnrolledCopies<kDim>>(
          ks + s * kTileElems, vs + s * kTileElems, k_head, v_head, start + s * kTileKeys, end,
          skip_key);
    }
    cp_async_commit();
  }
  // The angles need only the position: their sincosf runs before the wait too.
  const bool rotate = p.rope_inv_freq != nullptr && pos >= 0 && pos < p.max_seq;
  if (rotate && angle_lane) {
    const int j = threadIdx.x;
    rope_angle(pos, inv_freq, p.rope_scaling, &rope_cs[j], &rope_cs[kDim / 2 + j]);
  }
  if (rotate) __syncthreads();  // the angles, for every thread's rows after the wait
  if (p.early_dependents) pdl_launch_dependents();
  if (p.prefetch_history) pdl_wait();

  float* merge_m = reinterpret_cast<float*>(qs);  // [kWarps][16], after the main loop
  float* merge_l = merge_m + kWarps * kRows;      // [kWarps][16]
  float* merge_o = reinterpret_cast<float*>(ks);  // [kWarps][16][kMergeStride]
  if (start < end) {
    // With rope the new row is still in the qkv row (k heads after the q heads, then v).
    const bf16* k_src = nullptr;
    const bf16* v_src = nullptr;
    if (has_new) {
      k_src = rotate ? p.q + static_cast<size_t>(p.q_heads + kv_head) * kDim
                     : k_head + static_cast<size_t>(pos) * kDim;
      v_src = rotate ? p.q + static_cast<size_t>(p.q_heads + p.kv_heads + kv_head) * kDim
                     : v_head + static_cast<size_t>(pos) * kDim;
    }
    if (rotate) {
      load_rotated_query_and_new_row<kDim, kThreads>(qs, p.q + static_cast<size_t>(head0) * kDim,
                                                     heads, k_src, v_src, rope_cs);
    } else {
      load_query_and_new_row<kDim, kThreads>(qs, p.q + static_cast<size_t>(head0) * kDim, heads,
                                             k_src, v_src);
    }
    __syncthreads();
    if (rotate && has_new && first == 0) {  // the cache row, once per kv head
      copy_new_row<kDim, kThreads>(k_head + static_cast<size_t>(pos) * kDim,
                                   v_head + static_cast<size_t>(pos) * kDim, k_new, v_new);
    }
    const int new_row = has_new ? (pos - start) % kTileKeys : 0;
    if (has_new && new_tile < kStages) {  // its tile is in the ring already
      copy_new_row<kDim, kThreads>(ks + new_tile * kTileElems + new_row * kStride,
                                   vs + new_tile * kTileElems + new_row * kStride, k_new, v_new);
    }
    uint32_t qf[kDim / 16][4];
    load_q_fragments<kDim>(qf, qs, kStride);

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[kDim / 8][4] = {};
    if (wide) {
      // The whole history is in the ring: one pass, warp w over rows kWideKeys * w
      // onward (the stages are contiguous rows), skipped when they lie past the tiles
      // loaded (rows past the history in a loaded tile are zeros, masked below).
      cp_async_wait<0>();
      __syncthreads();
      const int row0 = warp * kWideKeys;
      if (row0 < tiles * kTileKeys) {
        float s[kWideKeys / 8][4];
        scores<kDim, kWideKeys>(s, qf, ks + row0 * kStride, kStride);
#pragma unroll
        for (int n = 0; n < kWideKeys / 8; ++n) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int key = start + row0 + n * 8 + 2 * t + (j & 1);
            s[n][j] = key < end ? s[n][j] * p.scale_log2 : -INFINITY;
          }
        }
        uint32_t pa[kWideKeys / 16][4];
        online_softmax<kWideKeys, kDim>(s, m, l, o, pa);
        accumulate_pv<kWideKeys, kDim>(o, pa, vs + row0 * kStride, kStride);
      }
    }
    for (int it = 0; !wide && it < tiles; ++it) {
      cp_async_wait<kStages - 1>();  // tile `it` has landed (kStages + it groups issued)
      __syncthreads();
      const int slot = it % kStages;
      const int row0 = slot * kTileKeys + warp * 16;
      float s[2][4];
      scores<kDim, 16>(s, qf, ks + row0 * kStride, kStride);
      const int key0 = start + it * kTileKeys + warp * 16;
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
      __syncthreads();  // the copies below overwrite this slot
      if (it + kStages < tiles) {
        load_kv_tile<kDim, kThreads, kTileKeys, kUnrolledCopies<kDim>>(
            ks + slot * kTileElems, vs + slot * kTileElems, k_head, v_head,
            start + (it + kStages) * kTileKeys, end, skip_key);
        if (it + kStages == new_tile) {
          copy_new_row<kDim, kThreads>(ks + slot * kTileElems + new_row * kStride,
                                       vs + slot * kTileElems + new_row * kStride, k_new, v_new);
        }
      }
      cp_async_commit();
    }
    cp_async_wait<0>();
    reduce_row_sums(l);
    __syncthreads();  // q and the tiles are free (also when no tile ran)

    // Merge the warps.
    if (t == 0) {
      merge_m[warp * kRows + g] = m[0];
      merge_m[warp * kRows + g + 8] = m[1];
      merge_l[warp * kRows + g] = l[0];
      merge_l[warp * kRows + g + 8] = l[1];
    }
#pragma unroll
    for (int d = 0; d < kDim / 8; ++d) {
      const int col = d * 8 + 2 * t;
      *reinterpret_cast<float2*>(merge_o + (warp * kRows + g) * kMergeStride + col) =
          make_float2(o[d][0], o[d][1]);
      *reinterpret_cast<float2*>(merge_o + (warp * kRows + g + 8) * kMergeStride + col) =
          make_float2(o[d][2], o[d][3]);
    }
    __syncthreads();
    // Thread i takes 4 output columns of a head: the warps' weights once per 4 columns,
    // 16-byte loads and stores.
    constexpr int kQuads = kDim / 4;
    for (int i = threadIdx.x; i < heads * kQuads; i += kThreads) {
      const int r = i / kQuads, d = (i - r * kQuads) * 4;
      // The slice is not empty: the warp of its first key has a finite max.
      float block_max = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, merge_m[w * kRows + r]);
      float4 out = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float weight = exp2f(merge_m[w * kRows + r] - block_max);
        const float4 o =
            *reinterpret_cast<const float4*>(merge_o + (w * kRows + r) * kMergeStride + d);
        out.x += weight * o.x;
        out.y += weight * o.y;
        out.z += weight * o.z;
        out.w += weight * o.w;
        sum += weight * merge_l[w * kRows + r];
      }
      if (active == 1) {
        const float inv = 1.0f / sum;
        *reinterpret_cast<uint2*>(p.out + static_cast<size_t>(head0 + r) * kDim + d) =
            make_uint2(pack_bf16(out.x * inv, out.y * inv), pack_bf16(out.z * inv, out.w * inv));
      } else {
        const size_t slot = static_cast<size_t>(head0 + r) * p.splits + split;
        *reinterpret_cast<float4*>(p.part_o + slot * kDim + d) = out;
        if (d == 0) p.part_ml[slot] = make_float2(block_max, sum);
      }
    }
  } else if (active == 1) {  // nothing live (position < 0): zeros, as an empty softmax
    for (int i = threadIdx.x; i < heads * kDim; i += kThreads) {
      p.out[static_cast<size_t>(head0) * kDim + i] = __float2bfloat16(0.0f);
    }
  } else {  // an empty slice (a short cache): weight zero, and outputs the merge may read
    for (int i = threadIdx.x; i < heads * kDim; i += kThreads) {
      const int r = i / kDim, d = i - r * kDim;
      const size_t slot = static_cast<size_t>(head0 + r) * p.splits + split;
      p.part_o[slot * kDim + d] = 0.0f;
      if (d == 0) p.part_ml[slot] = make_float2(-INFINITY, 0.0f);
    }
  }
  // Late: only now may the next kernel's blocks take SM slots (with several waves, blocks
  // parked at their PDL wait slowed the cache stream); the merge below still overlaps
  // the next kernel's start.
  if (!p.early_dependents) pdl_launch_dependents();
  if (active == 1) return;

  // The last block of this head group to finish merges all splits. One thread counts the
  // block done with an acquire-release atomic: the barrier before it orders every
  // thread's partial stores ahead of its release, and the barrier after it orders the
  // last block's partial loads (L2, not L1: __ldcg) after its acquire. Cheaper than a
  // fence in every thread on both sides (TinyLlama alone at 4096 keys 7.04 -> 6.69 µs).
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned before = atomic_inc_acq_rel(&p.counters[blockIdx.y], active - 1);
    last_block = before == static_cast<unsigned>(active - 1);
  }
  __syncthreads();
  if (!last_block) return;
  merge_splits<kDim, kThreads>(p, active, head0, heads);
}

// Whether a grid of `blocks` runs in one wave of this geometry's blocks.
template <int kDim, int kWarps>
Result<bool> one_wave(int64_t blocks) {
  using G = Geometry<kDim, kWarps>;
  const void* key = reinterpret_cast<const void*>(decode_attention_kernel<kDim, kWarps>);
  KVRT_RETURN_IF_ERROR(allow_shared_memory(key, G::kSmem, "decode_attention"));
  KVRT_ASSIGN_OR_RETURN(int per_sm, resident_blocks(key, G::kThreads, G::kSmem));
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  return blocks <= static_cast<int64_t>(per_sm) * sms;
}

// `single_wave`: the grid runs in one wave of this geometry's blocks (one_wave); `next`:
// the launch's own choice (DecodeAttention::next_launch).
template <int kDim, int kWarps>
Status run_geometry(const dim3 grid, bool single_wave, DependentLaunch next, Params p,
                    cudaStream_t stream) {
  using G = Geometry<kDim, kWarps>;
  // The next kernel (o_proj, in a decode step) may launch at once when the grid runs in
  // one wave: its blocks then stream their weights beside these. With several waves its
  // parked blocks would take the slots of this grid's later waves.
  if (next == DependentLaunch::kDefault) {
    next = single_wave ? DependentLaunch::kEarly : DependentLaunch::kLate;
  }
  p.early_dependents = next == DependentLaunch::kEarly;
  p.wide_keys = kWarps == 8 ? G::kStages * G::kTileKeys : 0;  // the kernel's `kWide` pass
  return launch(decode_attention_kernel<kDim, kWarps>, grid, dim3(G::kThreads), G::kSmem, stream,
                "decode_attention", p);
}

// Up to head_dim 80 always 8 warps; 96 4. At 128, 8 warps where the grid runs in one wave
// with them (one block per SM), else 4: Llama-3.2-3B and Llama-3.1-8B at 4096
// keys 9.1-9.2 -> 8.2-8.3 us, Qwen2.5-1.5B's two kv heads 10.7 -> 6.8 (its decode step
// 10% faster); at 32768 keys the 8-warp grid of eight kv heads took two waves, 37 -> 41
// us, so those keep 4 warps (docs/kernels-notes.md).
template <int kDim>
Status run(const DecodeAttention& op, Params p, cudaStream_t stream) {
  const dim3 grid(p.splits, op.kv_heads * p.head_groups);
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y;
  constexpr int kWarps = kDim == 96 ? 4 : 8;  // 96: not measured with 8 warps
  KVRT_ASSIGN_OR_RETURN(bool single_wave, (one_wave<kDim, kWarps>(blocks)));
  if constexpr (kDim == 128) {
    if (!single_wave) {
      KVRT_ASSIGN_OR_RETURN(bool narrow_single_wave, (one_wave<kDim, 4>(blocks)));
      return run_geometry<kDim, 4>(grid, narrow_single_wave, op.next_launch, p, stream);
    }
  }
  return run_geometry<kDim, kWarps>(grid, single_wave, op.next_launch, p, stream);
}

}  // namespace

Result<int> decode_attention_splits(int q_heads, int kv_heads, int max_seq) {
  if (q_heads < 1 || kv_heads < 1 || q_heads % kv_heads != 0 || max_seq < 1) {
    return invalid_argument("decode_attention_splits: need q_heads a positive multiple of ",
                            "kv_heads and max_seq > 0");
  }
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const int blocks_per_split = kv_heads * ceil_div(q_heads / kv_heads, kRows);
  // From the sweep in docs/kernels-sweep.md: 16 splits up to 16k keys (more cost more in
  // the merge than they gain in parallelism), slices of at most ~1024 keys beyond, and at
  // least a quarter of the multiprocessors busy whatever the head count. Beyond 16k keys
  // also about a block per multiprocessor, in whole batches of the merge's 16 splits:
  // with two kv heads (Qwen2.5) 64 splits at 32768 keys rather than 32, 14.2 -> 11.1 us
  // and 26.8 -> 21.4 (docs/kernels-notes.md).
  // The quarter of the SMs in whole batches of the merge's 16 splits: a 17th split costs
  // the last block a second trip for its partials (two kv heads: 17 splits -> 16).
  int quarter = ceil_div(sms, 4 * blocks_per_split);
  if (quarter > 16) quarter = quarter / 16 * 16;
  int splits = std::max({16, quarter, ceil_div(max_seq, 1024)});
  if (max_seq > 16 * 1024) splits = std::max(splits, sms / blocks_per_split / 16 * 16);
  return std::clamp(std::min(splits, ceil_div(max_seq, kChunkKeys)), 1, kMaxSplits);
}

Result<int> decode_attention_max_splits(int q_heads, int kv_heads, int head_dim, int max_seq,
                                        int splits) {
  if (q_heads < 1 || kv_heads < 1 || q_heads % kv_heads != 0 || max_seq < 1 || splits < 1 ||
      splits > kMaxSplits) {
    return invalid_argument("decode_attention_max_splits: need q_heads a positive multiple of ",
                            "kv_heads, max_seq > 0 and splits in [1, ", kMaxSplits, "]");
  }
  // Only the 8-warp geometry scores a slice in one pass (head_dim 64 and 80 always, 128
  // where its grid runs in one wave); at most twice the splits (their merge stays within
  // two batches), never past one wave, and none past what max_seq can use.
  if (head_dim != 64 && head_dim != 80 && head_dim != 128) return splits;
  constexpr int kWideKeys = 256;  // Geometry<dim, 8>: 2 stages of 128-key tiles
  const int wanted = std::min({2 * splits, ceil_div(max_seq, kWideKeys), kMaxSplits});
  if (wanted <= splits) return splits;
  const int64_t blocks =
      static_cast<int64_t>(wanted) * kv_heads * ceil_div(q_heads / kv_heads, kRows);
  bool single_wave = false;
  switch (head_dim) {
    case 64: {
      KVRT_ASSIGN_OR_RETURN(single_wave, (one_wave<64, 8>(blocks)));
      break;
    }
    case 80: {
      KVRT_ASSIGN_OR_RETURN(single_wave, (one_wave<80, 8>(blocks)));
      break;
    }
    default: {
      KVRT_ASSIGN_OR_RETURN(single_wave, (one_wave<128, 8>(blocks)));
      break;
    }
  }
  return single_wave ? wanted : splits;
}

namespace {
// Workspace: [counters: q_heads, 16-byte aligned][(max, sum): q_heads x splits]
//            [output partials: q_heads x splits x head_dim, 16-byte aligned]
size_t align16(size_t bytes) {
  return (bytes + 15) / 16 * 16;
}
size_t partials_offset(int q_heads, int splits) {
  return decode_attention_counter_bytes(q_heads) +
         align16(static_cast<size_t>(q_heads) * splits * sizeof(float2));
}
}  // namespace

size_t decode_attention_counter_bytes(int q_heads) {
  return q_heads < 1 ? 0 : align16(static_cast<size_t>(q_heads) * sizeof(unsigned));
}

size_t decode_attention_workspace_bytes(int q_heads, int head_dim, int splits) {
  if (q_heads < 1 || head_dim < 1 || splits < 1) return 0;
  return partials_offset(q_heads, splits) +
         static_cast<size_t>(q_heads) * splits * head_dim * sizeof(float);
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
  if (op.max_seq < 1 || op.splits < 1 || op.splits > kMaxSplits) {
    return invalid_argument("decode_attention: max_seq must be positive and splits in [1, ",
                            kMaxSplits, "], got max_seq ", op.max_seq, ", splits ", op.splits);
  }
  if (op.min_splits < 0 || op.min_splits > op.splits) {
    return invalid_argument("decode_attention: min_splits must be in [0, splits = ", op.splits,
                            "], got ", op.min_splits);
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
  // The split merge stores 4 outputs at a time; a misaligned out would fault on the device
  // (and leave the context unusable) rather than fail here.
  if (!is_aligned(op.out, 8)) {
    return invalid_argument("decode_attention: out must be 8-byte aligned");
  }
  Params p{};
  p.q = op.q;
  p.k = op.k_cache;
  p.v = op.v_cache;
  p.position = op.position;
  p.out = op.out;
  char* workspace = reinterpret_cast<char*>(op.workspace);
  p.counters = reinterpret_cast<unsigned*>(workspace);
  p.part_ml = reinterpret_cast<float2*>(workspace + decode_attention_counter_bytes(op.q_heads));
  p.part_o = reinterpret_cast<float*>(workspace + partials_offset(op.q_heads, op.splits));
  p.group = op.q_heads / op.kv_heads;
  p.head_groups = ceil_div(p.group, kRows);
  p.max_seq = op.max_seq;
  p.splits = op.splits;
  p.min_splits = op.min_splits > 0 ? op.min_splits : op.splits;
  p.scale_log2 = attention_scale_log2(op.scale, op.head_dim);
  p.prefetch_history = op.prefetch_history;
  p.rope_inv_freq = op.rope_inv_freq;
  p.rope_scaling = op.rope_attention_scaling;
  p.q_heads = op.q_heads;
  p.kv_heads = op.kv_heads;
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
