// Shared by the two decode_linear kernels (decode_linear_ring.cu: W through the copy
// engine into shared memory; decode_linear_direct.cu: W straight into registers): the
// launch parameters, the staging (and RMS normalization) of x, the tile -> W row map,
// and the epilogues.
//
// Both kernels use the same tensor-core trick: the (up to 8) token vectors are the M side
// of mma.m16n8k16 (rows 8..15 stay zero) and 8 W rows the N side. The order of k inside
// a dot product is free, so lane (g, t) reads 16 contiguous bytes of W row g (k =
// 8c..8c+7, c = 4s + t at k-step s) and the matching 16 bytes of x, and feeds them as
// the fragments of two k16 MMAs: the logical <-> physical k permutation is the same for
// both operands.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/mma.cuh"
#include "kvrt/engine/cuda/tuning.h"

namespace kvrt::engine::cuda::detail::decode_linear {

constexpr int kTileCols = 8;    // W rows per tile: the MMA's N
constexpr int kMaxTokens = 8;   // the MMA's M rows that carry data
constexpr int kWarps = 8;       // warps that compute (both kernels)
constexpr int kMaxStages = 16;  // ring kernel: slots per block at most
constexpr size_t kReduceBytes = 2 * kWarps * 64 * sizeof(float);

enum Epilogue : int { kStore, kResidual, kStoreF32, kSwiglu };
// A flag on an Epilogue: bias[row] is added to W·x in f32 before any rounding, as
// F.linear's bias is (Qwen2's q/k/v; Llama's attention_bias and mlp_bias).
constexpr int kBias = 4;
constexpr int epilogue_kind(int epilogue) {
  return epilogue & 3;
}
constexpr bool has_bias(int epilogue) {
  return (epilogue & kBias) != 0;
}
// A flag on kStoreF32 (one token, ring kernel): the launch also writes the argmax of its
// f32 outputs (argmax_key), so greedy decoding needs no kernel after the LM head.
constexpr int kArgmax = 8;
constexpr bool has_argmax(int epilogue) {
  return (epilogue & kArgmax) != 0;
}

// Calls f(std::integral_constant<int, e>{}) for the epilogue e known only at run time
// (a kind, with or without kBias), so that a launcher names each instantiation once.
template <typename F>
decltype(auto) with_epilogue(int epilogue, F&& f) {
  switch (epilogue) {
    case kStore:
      return f(std::integral_constant<int, kStore>{});
    case kResidual:
      return f(std::integral_constant<int, kResidual>{});
    case kStoreF32:
      return f(std::integral_constant<int, kStoreF32>{});
    case kSwiglu:
      return f(std::integral_constant<int, kSwiglu>{});
    case kStore | kBias:
      return f(std::integral_constant<int, kStore | kBias>{});
    case kResidual | kBias:
      return f(std::integral_constant<int, kResidual | kBias>{});
    case kStoreF32 | kBias:
      return f(std::integral_constant<int, kStoreF32 | kBias>{});
    default:
      return f(std::integral_constant<int, kSwiglu | kBias>{});
  }
}

struct Params {
  const bf16* w;         // [rows, in] or [2 rows, in]
  const bf16* x;         // [tokens, in]
  const bf16* norm_w;    // [in] or null
  const bf16* residual;  // [tokens, rows] or null
  bf16* y;               // [tokens, rows]
  float* y_f32;          // [tokens, rows]
  int tokens;
  int rows;
  int in;
  int chunks;    // in / 8: 16-byte chunks per row
  int x_stride;  // 16-byte chunks per staged token row (padded against bank conflicts)
  int tiles;
  float eps;
  // Ring kernel.
  int stage_keys;  // k elements per row in one ring slot
  int parts;       // ring slots per tile: ceil(in / stage_keys)
  int row_stride;  // bytes between W rows in a slot (padded against bank conflicts,
                   // except when contiguous)
  int stages;      // ring slots
  int contiguous;  // 1: a slot holds whole rows, copied as one run per tile (or half)
  // Direct kernel.
  int split_k;  // warps per tile (1, 2, 4 or 8)
  // Last: the fields every kernel reads keep their offsets, so a kernel without a bias
  // compiles to the same code whether or not this field exists.
  const bf16* bias;  // [rows] or [2 rows], or null
};

// kArgmax's pointers travel in the fields kStoreF32 leaves unused (y, residual): a larger
// Params made ptxas spill in every ring kernel, argmax or not. The index goes to y; the
// workspace, [best key: u64][blocks done: u32], zero before a launch and after it, is
// residual.
inline void set_argmax_pointers(Params& p, int32_t* out, void* workspace) {
  p.y = reinterpret_cast<bf16*>(out);
  p.residual = static_cast<const bf16*>(workspace);
}
__device__ __forceinline__ int32_t* argmax_out(const Params& p) {
  return reinterpret_cast<int32_t*>(p.y);
}
__device__ __forceinline__ unsigned long long* argmax_best(const Params& p) {
  return reinterpret_cast<unsigned long long*>(const_cast<bf16*>(p.residual));
}
__device__ __forceinline__ unsigned* argmax_done(const Params& p) {
  return reinterpret_cast<unsigned*>(argmax_best(p) + 1);
}

// An output as one 64-bit key whose unsigned order is torch.argmax's: the value's bits
// made monotonic (NaN above +inf, as the largest value), then the complement of the
// index, so that of equal values the lowest index wins. Never zero: zero is "none yet".
__device__ __forceinline__ unsigned long long argmax_key(float value, int index) {
  const uint32_t bits = __float_as_uint(value);
  const uint32_t ordered = value != value              ? 0xffffffffu
                           : (bits & 0x80000000u) != 0 ? ~bits
                                                       : bits | 0x80000000u;
  return (static_cast<unsigned long long>(ordered) << 32) | ~static_cast<uint32_t>(index);
}

// The end of a kArgmax launch, run by one whole warp whose lanes hold `best` (the keys of
// the outputs they wrote, 0 for none): the warp's best goes into the launch's by a 64-bit
// atomicMax, and the last block to count itself done (acquire-release, so every block's
// atomicMax is ordered before it) takes the result out, writes the index and leaves both
// words at zero for the next launch.
__device__ __forceinline__ void finish_argmax(const Params& p, unsigned long long best) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, best, offset);
    best = other > best ? other : best;
  }
  if ((threadIdx.x & 31) != 0) return;
  atomicMax(argmax_best(p), best);
  unsigned before;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
               : "=r"(before)
               : "l"(argmax_done(p)), "r"(gridDim.x - 1)
               : "memory");
  if (before != gridDim.x - 1) return;
  const unsigned long long result = atomicExch(argmax_best(p), 0ull);
  *argmax_out(p) = static_cast<int32_t>(~static_cast<uint32_t>(result));
}

// x straight into registers, for a kernel whose kWarps warps each multiply a fixed set of
// at most kRegisterSteps chunks of x, every chunk of a row held by exactly one warp: lane
// (g, t) holds chunks chunk(u) of token g (zero past the row or the tokens). With kNorm
// they are normalized in place against `gamma`, the matching norm-weight chunks
// (load_gamma_registers: weights are constant, so callers load them before the PDL
// wait); `squares` ([kWarps][kMaxTokens] floats of shared memory) carries the sums of
// squares across warps, and `sync` is a barrier over the kWarps warps.
constexpr int kRegisterSteps = 8;

template <typename Chunk>
__device__ __forceinline__ void load_gamma_registers(const Params& p,
                                                     uint4 (&gamma)[kRegisterSteps], Chunk chunk) {
  const uint4* norm_w = reinterpret_cast<const uint4*>(p.norm_w);
#pragma unroll
  for (int u = 0; u < kRegisterSteps; ++u) {
    const int c = chunk(u);
    gamma[u] = c < p.chunks ? norm_w[c] : make_uint4(0, 0, 0, 0);
  }
}

template <bool kNorm, typename Chunk, typename Sync>
__device__ __forceinline__ void load_x_registers(const Params& p, uint4 (&xr)[kRegisterSteps],
                                                 const uint4 (&gamma)[kRegisterSteps], Chunk chunk,
                                                 float* squares, Sync sync) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const bool x_ok = g < p.tokens;
  const uint4* x = reinterpret_cast<const uint4*>(p.x) + (x_ok ? g : 0) * p.chunks;
#pragma unroll
  for (int u = 0; u < kRegisterSteps; ++u) {
    const int c = chunk(u);
    xr[u] = x_ok && c < p.chunks ? x[c] : make_uint4(0, 0, 0, 0);
  }
  if constexpr (kNorm) {
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < kRegisterSteps; ++u) sum += sum_of_squares(xr[u]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((lane & 3) == 0) squares[warp * kMaxTokens + g] = sum;
    sync();
    float row_sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) row_sum += squares[v * kMaxTokens + g];
    const float inv_rms = x_ok ? rsqrtf(row_sum / static_cast<float>(p.in) + p.eps) : 0.0f;
#pragma unroll
    for (int u = 0; u < kRegisterSteps; ++u) xr[u] = rms_normalize(xr[u], gamma[u], inv_rms);
  }
}

// load_x_registers for one token, the loads and the normalization spread over the
// warp's 32 lanes: lane 4u + t takes chunk(u) of lane group t (one load per lane, one
// instruction per warp) and `gamma0`, its norm-weight chunk; the chunks then move to
// lanes 0-3, which carry token 0 in the MMA layout, by shuffles, and the other lanes'
// registers are zero. The general path loads and normalizes all of a warp's chunks in
// those 4 lanes: eight predicated loads and eight chunks of arithmetic per lane where
// one of each does.
template <bool kNorm, typename Chunk, typename Sync>
__device__ __forceinline__ void load_x_registers_one_token(const Params& p,
                                                           uint4 (&xr)[kRegisterSteps],
                                                           uint4 gamma0, Chunk chunk,
                                                           float* squares, Sync sync) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int c = chunk(lane >> 2);  // chunk() takes this lane's t = lane % 4
  uint4 mine = c < p.chunks ? reinterpret_cast<const uint4*>(p.x)[c] : make_uint4(0, 0, 0, 0);
  if constexpr (kNorm) {
    const float sum = warp_sum(sum_of_squares(mine));
    if (lane == 0) squares[warp * kMaxTokens] = sum;
    sync();
    float row_sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) row_sum += squares[v * kMaxTokens];
    mine = rms_normalize(mine, gamma0, rsqrtf(row_sum / static_cast<float>(p.in) + p.eps));
  }
  const bool token0 = lane < 4;
#pragma unroll
  for (int u = 0; u < kRegisterSteps; ++u) {
    const int from = 4 * u + (lane & 3);
    const uint4 v =
        make_uint4(__shfl_sync(0xffffffffu, mine.x, from), __shfl_sync(0xffffffffu, mine.y, from),
                   __shfl_sync(0xffffffffu, mine.z, from), __shfl_sync(0xffffffffu, mine.w, from));
    xr[u] = token0 ? v : make_uint4(0, 0, 0, 0);
  }
}

// stage_x's norm-weight chunks tid + m * kThreads, m < kGamma, loaded by the caller
// before the PDL wait (weights are constant); chunks past those are loaded in the
// normalizing pass (in > kGamma * kThreads * 8).
template <int kThreads, int kGamma>
__device__ __forceinline__ void load_staged_gamma(const Params& p, uint4 (&gamma)[kGamma],
                                                  int tid) {
  const uint4* norm_w = reinterpret_cast<const uint4*>(p.norm_w);
#pragma unroll
  for (int m = 0; m < kGamma; ++m) {
    const int c = tid + m * kThreads;
    gamma[m] = c < p.chunks ? norm_w[c] : make_uint4(0, 0, 0, 0);
  }
}

// Copies x into shared memory (one read of global memory, loads unrolled so several are
// in flight), then, when kNorm, normalizes it in place with HF LlamaRMSNorm's rounding:
// bf16(bf16(x * inv_rms) * gamma), `gamma` from load_staged_gamma. kThreads threads with
// ids `tid` take part; `sync` synchronizes exactly them. `scratch` holds >= kWarps * 8 +
// 8 floats. The caller syncs before reading xs. (The normalizing pass runs over chunks,
// not elements: walking elements made each thread wait on one gamma load per token, ~2 us
// at 8 tokens.)
template <bool kNorm, int kThreads, int kBatch, int kGamma, typename Sync>
__device__ void stage_x(const Params& p, uint4* xs, float* scratch, int tid,
                        const uint4 (&gamma)[kGamma], Sync sync) {
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  const int total = p.tokens * p.chunks;
  float squares[kMaxTokens] = {};
  // Batches of kBatch predicated loads per thread: all of a batch are in flight at once
  // whatever the trip count (an unrolled loop runs short trip counts in its serial
  // remainder).
  for (int base = tid; base < total; base += kBatch * kThreads) {
    uint4 values[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * kThreads;
      values[k] = i < total ? x[i] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = base + k * kThreads;
      if (i >= total) break;
      const uint4 value = values[k];
      const int token = i / p.chunks;
      xs[token * p.x_stride + (i - token * p.chunks)] = value;
      if constexpr (kNorm) {
        const float sum = sum_of_squares(value);
#pragma unroll
        for (int t = 0; t < kMaxTokens; ++t) squares[t] += t == token ? sum : 0.0f;
      }
    }
  }
  if constexpr (kNorm) {
    constexpr int kStageWarps = kThreads / 32;
    const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int token = 0; token < kMaxTokens; ++token) {
      const float sum = warp_sum(squares[token]);
      if (lane == 0) scratch[warp * kMaxTokens + token] = sum;
    }
    sync();
    if (tid < p.tokens) {
      float sum = 0.0f;
      for (int w = 0; w < kStageWarps; ++w) sum += scratch[w * kMaxTokens + tid];
      scratch[kStageWarps * kMaxTokens + tid] = rsqrtf(sum / static_cast<float>(p.in) + p.eps);
    }
    sync();
    // Chunk-major, so each thread uses a gamma chunk once for all tokens.
    const float* inv_rms = scratch + kStageWarps * kMaxTokens;
    auto normalize_chunk = [&](int c, uint4 gv) {
      for (int token = 0; token < p.tokens; ++token) {
        uint4& slot = xs[token * p.x_stride + c];
        slot = rms_normalize(slot, gv, inv_rms[token]);
      }
    };
#pragma unroll
    for (int m = 0; m < kGamma; ++m) {
      const int c = tid + m * kThreads;
      if (c < p.chunks) normalize_chunk(c, gamma[m]);
    }
    const uint4* norm_w = reinterpret_cast<const uint4*>(p.norm_w);
    for (int c = tid + kGamma * kThreads; c < p.chunks; c += kThreads) {
      normalize_chunk(c, norm_w[c]);
    }
  }
}

// The W row that MMA column `col` of `tile` reads, or -1 past the matrix. SwiGLU tiles
// hold 4 gate rows then the 4 up rows of the same outputs, so the epilogue has both.
template <bool kGlu>
__device__ __forceinline__ int matrix_row(const Params& p, int tile, int col) {
  if constexpr (kGlu) {
    const int out = tile * (kTileCols / 2) + (col & 3);
    return out < p.rows ? (col < 4 ? out : p.rows + out) : -1;
  } else {
    const int out = tile * kTileCols + col;
    return out < p.rows ? out : -1;
  }
}

// Outputs per tile: 8, or 4 with SwiGLU (gate and up columns pair up).
template <int kEpilogue>
constexpr int outputs_per_tile() {
  return epilogue_kind(kEpilogue) == kSwiglu ? kTileCols / 2 : kTileCols;
}

// What the epilogue adds to an output's sums besides W·x, in one register (the ring
// kernels with x in registers have none to spare: carried as floats they spilled):
// without kBias the residual in f32 (zero without one); with kBias two bf16 halves, the
// bias (low) and the residual or, with SwiGLU, the up row's bias (high).
template <int kEpilogue>
using Addend = std::conditional_t<has_bias(kEpilogue), uint32_t, float>;

template <int kEpilogue>
__device__ __forceinline__ float addend_bias(Addend<kEpilogue> a) {
  return __uint_as_float(a << 16);
}
template <int kEpilogue>
__device__ __forceinline__ float addend_high(Addend<kEpilogue> a) {  // residual or up bias
  if constexpr (has_bias(kEpilogue)) {
    return __uint_as_float(a & 0xffff0000u);
  } else {
    return a;
  }
}

__device__ __forceinline__ uint32_t bf16_bits(const bf16* values, size_t i) {
  return reinterpret_cast<const uint16_t*>(values)[i];
}

// The bias of output `out_row` into `a` (kBias; nothing out of range). Biases are
// weights: a kernel may load them before the PDL wait.
template <int kEpilogue>
__device__ __forceinline__ void load_bias(const Params& p, int out_row, Addend<kEpilogue>& a) {
  if constexpr (has_bias(kEpilogue)) {
    if (out_row < p.rows) {
      a |= bf16_bits(p.bias, out_row);
      if constexpr (epilogue_kind(kEpilogue) == kSwiglu) {
        a |= bf16_bits(p.bias, static_cast<size_t>(p.rows) + out_row) << 16;
      }
    }
  }
}

// The residual of output `out_row` of `token` into `a` (kResidual; nothing out of range).
// In place is safe: each output is read and then written by the same thread.
template <int kEpilogue>
__device__ __forceinline__ void load_residual(const Params& p, int token, int out_row,
                                              Addend<kEpilogue>& a) {
  if constexpr (epilogue_kind(kEpilogue) == kResidual) {
    if (token < p.tokens && out_row < p.rows) {
      const size_t i = static_cast<size_t>(token) * p.rows + out_row;
      if constexpr (has_bias(kEpilogue)) {
        a |= bf16_bits(p.residual, i) << 16;
      } else {
        a = __bfloat162float(p.residual[i]);
      }
    }
  }
}

// Both, for the kernels that load an output's addend a tile ahead of the epilogue that
// uses it, so the end of a launch does not wait on memory.
template <int kEpilogue>
__device__ __forceinline__ Addend<kEpilogue> load_addend(const Params& p, int token, int out_row) {
  Addend<kEpilogue> a = 0;
  load_residual<kEpilogue>(p, token, out_row, a);
  if (token < p.tokens) load_bias<kEpilogue>(p, out_row, a);
  return a;
}

// Writes output `out_row` of `token` from the tile's f32 sums (`up`: SwiGLU only) and its
// addend (load_addend), with HF's rounding points.
template <int kEpilogue>
__device__ __forceinline__ void store_output(const Params& p, int token, int out_row, float sum,
                                             float up, Addend<kEpilogue> a) {
  if (token >= p.tokens || out_row >= p.rows) return;
  constexpr int kKind = epilogue_kind(kEpilogue);
  if constexpr (has_bias(kEpilogue)) {  // not `sum + 0` without one: -0 + 0 is +0
    sum += addend_bias<kEpilogue>(a);
    if constexpr (kKind == kSwiglu) up += addend_high<kEpilogue>(a);
  }
  const size_t out = static_cast<size_t>(token) * p.rows + out_row;
  if constexpr (kKind == kStore) {
    p.y[out] = __float2bfloat16(sum);
  } else if constexpr (kKind == kResidual) {
    p.y[out] = __float2bfloat16(round_bf16(sum) + addend_high<kEpilogue>(a));
  } else if constexpr (kKind == kStoreF32) {
    p.y_f32[out] = sum;
  } else {
    p.y[out] = __float2bfloat16(swiglu_value(round_bf16(sum), round_bf16(up)));
  }
}

}  // namespace kvrt::engine::cuda::detail::decode_linear

namespace kvrt::engine::cuda::detail {

// Grid size for `work` units (tiles, or rounds of tiles) on at most `slots` blocks. A
// bandwidth-bound launch lasts as long as its busiest block, and the blocks share the
// bandwidth, so filling every slot can lose to fewer blocks: 1408 tiles on 264 slots
// leave 88 blocks with 6 tiles and 176 with 5 (the busiest carry 1584 tiles' worth of
// time), while 235 blocks of 6 (two of 5) carry 1410. `balanced` picks the fewest blocks
// that keep the largest share.
inline int decode_linear_grid(int work, int slots, bool balanced) {
  const int grid = work < slots ? work : slots;
  return balanced ? ceil_div(work, ceil_div(work, grid)) : grid;
}

// Whether the ring kernel keeps x in registers (load_x_registers): when a slot holds
// whole rows of at most kWarps * kRegisterSteps k-steps. x then takes no shared memory.
// (The direct kernel stages x: its W loads already fill the registers that two launches'
// blocks per SM leave; x in registers too spilled, or cost the next launch its room.)
inline bool ring_x_in_registers(const decode_linear::Params& p) {
  using namespace decode_linear;
  return p.parts == 1 && ceil_div(p.chunks, 4) <= kWarps * kRegisterSteps;
}

// Launchers of the two kernels (the dispatcher in decode_linear.cu picks one per shape).
// `norm` and `epilogue` select the instantiation.
size_t decode_linear_ring_smem(const decode_linear::Params& p);
Status launch_decode_linear_ring(const decode_linear::Params& p, int epilogue, bool norm,
                                 const DecodeLinearTuning& tuning, cudaStream_t stream);
Status launch_decode_linear_direct(const decode_linear::Params& p, int epilogue, bool norm,
                                   int blocks_per_sm, bool balanced, cudaStream_t stream);

}  // namespace kvrt::engine::cuda::detail
