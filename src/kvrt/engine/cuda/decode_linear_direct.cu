// decode_linear, direct kernel: W goes from HBM straight into registers, kUnroll 16-byte
// loads per lane issued back to back before the MMAs that use them, with many warps per
// multiprocessor to keep enough bytes in flight.
//
//   round:  a block's 8 warps take 8 / split_k tiles, split_k warps per tile, each warp a
//           strided share of the tile's k-steps; blocks walk the rounds persistently
//   early:  W is constant, so before waiting for the previous kernel on the stream (PDL)
//           every warp issues the loads of its first k-steps
//   end:    the warps' partial sums meet in shared memory (two buffers alternate, so one
//           barrier per round suffices) and the epilogue runs there
//
// One token with 8 warps per tile and in <= 8192 (q/k/v, o_proj, down) takes its own path,
// direct_one_token_kernel: a block per tile, dot products on CUDA cores.
#include <algorithm>

#include "kvrt/engine/cuda/decode_linear_common.cuh"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda::detail {
namespace {

using namespace decode_linear;

constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;             // W loads in flight per lane
constexpr int kMaxOneTokenChunks = 4;  // per thread, one token's path (in <= 8192)

// The one-token path's chunks per thread held in registers; the rest are copied into
// shared memory (cp.async), also before the PDL wait. Register loads must land before
// the wait (keep_loads_before_wait), copies need not, so with W copied x's trip after
// the wait overlaps W still landing. What decides is the decode step, where a launch's
// blocks enter beside its predecessor's only if they fit (docs/kernels-notes.md): o_proj's one
// chunk is copied (32 KB a block, 40 registers; in registers its own chain ran 2-9%
// faster but both steps 3-4% slower); q/k/v's one chunk, behind the norm, stays in
// registers (2.3 KB a block; on the ring the steps ran 1-3% slower, copied it gained
// less); two and three chunks are copied (64-96 KB a block); of four, three are copied
// (128 KB a block would not fit two per SM; with two copied Llama-3.2-1B's down took 5%
// longer alone).
constexpr int one_token_register_chunks(int chunks, bool norm) {
  return chunks == 1 ? (norm ? 1 : 0) : chunks == 4 ? 1 : 0;
}
constexpr size_t one_token_smem_bytes(int chunks, bool norm) {
  return static_cast<size_t>(chunks - one_token_register_chunks(chunks, norm)) * kTileCols *
         kThreads * sizeof(uint4);
}

template <int kEpilogue, bool kNorm>
__global__ void __launch_bounds__(kThreads, 3) direct_kernel(const Params p) {
  constexpr bool kGlu = epilogue_kind(kEpilogue) == kSwiglu;
  extern __shared__ uint4 smem[];
  uint4* xs = smem;                                                      // [tokens][x_stride]
  float* reduce = reinterpret_cast<float*>(xs + p.tokens * p.x_stride);  // [2][warps][64]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int per_round = kWarps / p.split_k;  // tiles per round
  const int tile_slot = warp / p.split_k, phase = warp % p.split_k;
  const int rounds = ceil_div(p.tiles, per_round);
  const int steps = ceil_div(p.chunks, 4);  // 32-wide k-steps per row
  const int my_steps = phase < steps ? ceil_div(steps - phase, p.split_k) : 0;

  uint4 w[kUnroll];
  // Loads k-steps [s0, s0 + kUnroll) of this warp's share of W row `row` (-1: zeros).
  auto load = [&](int row, int s0) {
    const bf16* base = p.w + static_cast<size_t>(row < 0 ? 0 : row) * p.in;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = (phase + (s0 + u) * p.split_k) * 4 + t;
      const bool valid = row >= 0 && s0 + u < my_steps && c < p.chunks;
      w[u] = load_stream(base + (valid ? c * 8 : 0), valid);
    }
  };
  auto row_of = [&](int round) {
    const int tile = round * per_round + tile_slot;
    return tile < p.tiles ? matrix_row<kGlu>(p, tile, g) : -1;
  };

  int round = blockIdx.x;
  if (round < rounds) load(row_of(round), 0);
  uint4 gamma[1] = {};  // in <= 2048 without loads after the wait (registers are scarce)
  if constexpr (kNorm) load_staged_gamma<kThreads>(p, gamma, threadIdx.x);
  pdl_launch_dependents();
  pdl_wait();
  stage_x<kNorm, kThreads, 4>(p, xs, reduce, threadIdx.x, gamma, [] { __syncthreads(); });
  __syncthreads();

  const bool x_ok = g < p.tokens;
  const uint4* x_row = xs + (x_ok ? g : 0) * p.x_stride;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // The epilogue's item i (tile slot, token, column j) goes to thread i % kThreads; its
  // addend (residual, bias) is loaded a round ahead.
  constexpr int kOutputs = outputs_per_tile<kEpilogue>();
  constexpr int kItemsPerThread = kWarps * kMaxTokens * kOutputs / kThreads;  // at most
  const int items = per_round * kMaxTokens * kOutputs;
  auto output_row = [&](int round_, int i) {
    return (round_ * per_round + i / (kMaxTokens * kOutputs)) * kOutputs + i % kOutputs;
  };
  Addend<kEpilogue> addend[kItemsPerThread];
  auto load_addends = [&](int round_) {
#pragma unroll
    for (int m = 0; m < kItemsPerThread; ++m) {
      const int i = threadIdx.x + m * kThreads;
      addend[m] = i < items && round_ < rounds
                      ? load_addend<kEpilogue>(p, i % (kMaxTokens * kOutputs) / kOutputs,
                                               output_row(round_, i))
                      : Addend<kEpilogue>(0);
    }
  };
  load_addends(round);
  for (int buffer = 0, first = 1; round < rounds; round += gridDim.x, buffer ^= 1, first = 0) {
    const int row = row_of(round);
    // Two accumulators: half as long a chain of dependent MMAs.
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s0 = 0; s0 < my_steps; s0 += kUnroll) {
      if (!(first && s0 == 0)) load(row, s0);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = (phase + (s0 + u) * p.split_k) * 4 + t;
        const uint4 xv = (x_ok && s0 + u < my_steps && c < p.chunks) ? x_row[c] : zero;
        mma_bf16(acc, xv.x, 0u, xv.y, 0u, w[u].x, w[u].y);
        mma_bf16(acc2, xv.z, 0u, xv.w, 0u, w[u].z, w[u].w);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] += acc2[i];
    // acc[0..1]: token g, tile columns 2t and 2t+1 (acc[2..3] are the MMA's zero rows).
    float* partial = reduce + buffer * (kWarps * 64);
    reinterpret_cast<float2*>(partial + warp * 64)[g * 4 + t] = make_float2(acc[0], acc[1]);
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kItemsPerThread; ++m) {
      const int i = threadIdx.x + m * kThreads;
      if (i >= items) break;
      const int slot = i / (kMaxTokens * kOutputs), e = i % (kMaxTokens * kOutputs);
      const int token = e / kOutputs, j = e % kOutputs;
      float sum = 0.0f, up = 0.0f;
      for (int v = slot * p.split_k; v < (slot + 1) * p.split_k; ++v) {
        sum += partial[v * 64 + token * kTileCols + j];
        if constexpr (kGlu) up += partial[v * 64 + token * kTileCols + 4 + j];
      }
      store_output<kEpilogue>(p, token, output_row(round, i), sum, up, addend[m]);
    }
    load_addends(round + gridDim.x);
  }
}

// One token, rows of at most 4 x kThreads chunks (in <= 8192: q/k/v, o_proj and both
// models' down): a block takes one tile, and thread t fetches chunks t, t + kThreads, ...
// of each of its 8 W rows — each load instruction of the block reads 4 KB of one row —
// before the PDL wait: into registers (one_token_register_chunks) or into its own slots
// of shared memory, which it alone reads back (no barrier). With one chunk (in <= 2048)
// several blocks fit on an SM (o_proj's copies: 32 KB and 40 registers a block, six;
// q/k/v's in registers, 64 a thread: four), so two launches' blocks sit side by side;
// with more, a launch's 2 blocks per SM hold the whole matrix in flight.
// keep_loads_before_wait is what keeps the register loads there (ptxas otherwise hoists
// the wait above them). After the wait thread t needs only its chunks of x: one trip, no
// staging and no barrier for x (kernels_bench's ladder: staging x behind a barrier costs
// ~0.2 us a launch). The 8 dot products run on CUDA cores, are summed over each warp by a
// halving exchange (9 shuffles, not 8 x 5: every warp of the SM runs this burst at once
// after the wait) and over the warps in shared memory.
template <int kEpilogue, bool kNorm, int kChunks>
__global__ void __launch_bounds__(kThreads, kChunks == 1 ? 4 : 2)
    direct_one_token_kernel(const Params p) {
  constexpr bool kGlu = epilogue_kind(kEpilogue) == kSwiglu;
  constexpr int kRegisterChunks = one_token_register_chunks(kChunks, kNorm);
  extern __shared__ uint4 w_copied[];  // [kChunks - kRegisterChunks][kTileCols][kThreads]
  constexpr int kOutputs = outputs_per_tile<kEpilogue>();
  __shared__ float norm_sums[kWarps];
  __shared__ float row_sums[kWarps][kTileCols];
  // Only with registers or a bias to keep ahead of the PDL wait.
  __shared__ uint32_t load_fences[kRegisterChunks > 0 || has_bias(kEpilogue) ? kThreads : 1];
  pdl_launch_dependents();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int tile = blockIdx.x;
  int own[kChunks];  // this thread's chunks of every row and of x
  bool in_row[kChunks];
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    own[k] = threadIdx.x + k * kThreads;
    in_row[k] = own[k] < p.chunks;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 w[kRegisterChunks > 0 ? kRegisterChunks * kTileCols : 1];  // [chunk][row]
#pragma unroll
  for (int r = 0; r < kTileCols; ++r) {
    const int row = matrix_row<kGlu>(p, tile, r);
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const bool valid = row >= 0 && in_row[k];
      const bf16* src = p.w + (valid ? static_cast<size_t>(row) * p.in + own[k] * 8 : 0);
      if (k < kRegisterChunks) {
        w[k * kTileCols + r] = load_stream(src, valid);
      } else {  // zero-filled when !valid
        cp_async_16(&w_copied[((k - kRegisterChunks) * kTileCols + r) * kThreads + threadIdx.x],
                    src, valid);
      }
    }
  }
  if constexpr (kRegisterChunks < kChunks) cp_async_commit();
  // The norm weight rides before the wait beside one chunk of W; beside more (whose
  // register loads spilled with it) it is loaded after the wait, in x's trip.
  constexpr bool kGammaEarly = kChunks == 1;
  uint4 gamma[kChunks];
  auto load_gamma = [&] {
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      gamma[k] = kNorm && in_row[k] ? reinterpret_cast<const uint4*>(p.norm_w)[own[k]] : zero;
    }
  };
  if constexpr (kGammaEarly) load_gamma();
  const bool writer = threadIdx.x < kOutputs;
  Addend<kEpilogue> addend = 0;  // the bias now (a weight), the residual after the wait
  if (writer) load_bias<kEpilogue>(p, tile * kOutputs + threadIdx.x, addend);
  // The bias lands before the wait too: Qwen2.5's q/k/v took 2.24-2.25 and 2.85-2.86 us
  // with it only issued there, 2.20 and 2.83-2.84 so (2.20 and 2.79 without a bias).
  uint32_t bias_bits = 0;
  if constexpr (has_bias(kEpilogue)) bias_bits = addend;
  if constexpr (kRegisterChunks > 0) {
    keep_loads_before_wait(w, &load_fences[threadIdx.x], bias_bits);
  } else if constexpr (has_bias(kEpilogue)) {
    const uint4 none[1] = {zero};
    keep_loads_before_wait(none, &load_fences[threadIdx.x], bias_bits);
  }
  // This thread's register chunks have landed (its copies may still be in flight).
  pdl_wait();

  if (writer) load_residual<kEpilogue>(p, 0, tile * kOutputs + threadIdx.x, addend);
  if constexpr (!kGammaEarly) load_gamma();
  uint4 x[kChunks];
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    x[k] = in_row[k] ? reinterpret_cast<const uint4*>(p.x)[own[k]] : zero;
  }
  if constexpr (kNorm) {  // HF LlamaRMSNorm's rounding: bf16(bf16(x * inv_rms) * gamma)
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < kChunks; ++k) squares += sum_of_squares(x[k]);
    squares = warp_sum(squares);
    if (lane == 0) norm_sums[warp] = squares;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) total += norm_sums[v];
    const float inv_rms = rsqrtf(total / static_cast<float>(p.in) + p.eps);
#pragma unroll
    for (int k = 0; k < kChunks; ++k) x[k] = rms_normalize(x[k], gamma[k], inv_rms);
  }
  if constexpr (kRegisterChunks < kChunks) cp_async_wait<0>();  // this thread's own copies
  float dot[kTileCols];
#pragma unroll
  for (int r = 0; r < kTileCols; ++r) {
    float lo = 0.0f, hi = 0.0f;
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const uint4 wv =
          k < kRegisterChunks
              ? w[k * kTileCols + r]
              : w_copied[((k - kRegisterChunks) * kTileCols + r) * kThreads + threadIdx.x];
      const uint32_t wp[4] = {wv.x, wv.y, wv.z, wv.w};
      const uint32_t xp[4] = {x[k].x, x[k].y, x[k].z, x[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        lo = fmaf(bf16_lo(wp[j]), bf16_lo(xp[j]), lo);
        hi = fmaf(bf16_hi(wp[j]), bf16_hi(xp[j]), hi);
      }
    }
    dot[r] = lo + hi;
  }
  // Halving exchange: each step keeps half the rows, so 4 + 2 + 1 + 1 + 1 shuffles sum the
  // 8 rows over the warp; lane l ends with row 4 (l >> 4 & 1) + 2 (l >> 3 & 1) + (l >> 2 & 1).
  const bool up16 = lane & 16, up8 = lane & 8, up4 = lane & 4;
  float e[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float mine = up16 ? dot[i + 4] : dot[i], theirs = up16 ? dot[i] : dot[i + 4];
    e[i] = mine + __shfl_xor_sync(0xffffffffu, theirs, 16);
  }
  float f[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float mine = up8 ? e[i + 2] : e[i], theirs = up8 ? e[i] : e[i + 2];
    f[i] = mine + __shfl_xor_sync(0xffffffffu, theirs, 8);
  }
  float h = (up4 ? f[1] : f[0]) + __shfl_xor_sync(0xffffffffu, up4 ? f[0] : f[1], 4);
  h += __shfl_xor_sync(0xffffffffu, h, 2);
  h += __shfl_xor_sync(0xffffffffu, h, 1);
  if ((lane & 3) == 0) row_sums[warp][(up16 ? 4 : 0) + (up8 ? 2 : 0) + (up4 ? 1 : 0)] = h;
  __syncthreads();
  if (writer) {
    float sum = 0.0f, up = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) {
      sum += row_sums[v][threadIdx.x];
      if constexpr (kGlu) up += row_sums[v][4 + threadIdx.x];
    }
    store_output<kEpilogue>(p, 0, tile * kOutputs + threadIdx.x, sum, up, addend);
  }
}

template <int kEpilogue>
void (*pick(bool norm))(Params) {
  return norm ? direct_kernel<kEpilogue, true> : direct_kernel<kEpilogue, false>;
}

template <int kEpilogue, int kChunks>
void (*pick_one_token(bool norm))(Params) {
  return norm ? direct_one_token_kernel<kEpilogue, true, kChunks>
              : direct_one_token_kernel<kEpilogue, false, kChunks>;
}

template <int kEpilogue>
void (*pick_one_token(bool norm, int chunks_per_thread))(Params) {
  return chunks_per_thread == 1   ? pick_one_token<kEpilogue, 1>(norm)
         : chunks_per_thread == 2 ? pick_one_token<kEpilogue, 2>(norm)
         : chunks_per_thread == 3 ? pick_one_token<kEpilogue, 3>(norm)
                                  : pick_one_token<kEpilogue, 4>(norm);
}

}  // namespace

Status launch_decode_linear_direct(const Params& p, int epilogue, bool norm, int blocks_per_sm,
                                   bool balanced, cudaStream_t stream) {
  if (p.tokens == 1 && p.split_k == kWarps && p.chunks <= kMaxOneTokenChunks * kThreads) {
    const int per_thread = ceil_div(p.chunks, kThreads);
    void (*kernel)(Params) = with_epilogue(
        epilogue, [&](auto kEpilogue) { return pick_one_token<kEpilogue()>(norm, per_thread); });
    const size_t smem = one_token_smem_bytes(per_thread, norm);
    KVRT_RETURN_IF_ERROR(
        allow_shared_memory(reinterpret_cast<const void*>(kernel), smem, "decode_linear"));
    return launch(kernel, dim3(p.tiles), dim3(kThreads), smem, stream, "decode_linear", p);
  }
  void (*kernel)(Params) =
      with_epilogue(epilogue, [&](auto kEpilogue) { return pick<kEpilogue()>(norm); });
  const size_t smem = static_cast<size_t>(p.tokens) * p.x_stride * sizeof(uint4) + kReduceBytes;
  const void* key = reinterpret_cast<const void*>(kernel);
  KVRT_RETURN_IF_ERROR(allow_shared_memory(key, smem, "decode_linear"));
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const int rounds = ceil_div(p.tiles, kWarps / p.split_k);
  const int grid = decode_linear_grid(rounds, std::max(1, blocks_per_sm) * sms, balanced);
  return launch(kernel, dim3(grid), dim3(kThreads), smem, stream, "decode_linear", p);
}

}  // namespace kvrt::engine::cuda::detail
