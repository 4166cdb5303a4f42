// decode_linear, ring kernel: W reaches shared memory through the copy engine (bulk
// copies, one per W row and ring slot), 8 warps compute from there.
//
//   tile:      8 W rows; a block owns a contiguous run of tiles
//   producer:  one warp moves W through a ring of shared-memory slots (slot = 8 rows x
//              stage_keys). W is constant, so it starts at once, before the previous
//              kernel on the stream has finished (PDL): a launch's first slots are in
//              flight while its predecessor drains
//   consumers: 8 warps wait for the previous kernel, take x (RMS-normalized when
//              fused) into registers when a slot holds whole rows of <= 2048 keys (one
//              token: loaded and normalized over all lanes), or else stage it in
//              shared memory, split each slot's k-steps, free the slot, and at the end
//              of a tile sum their partials in shared memory and run the epilogue (its
//              residual and bias loaded a tile ahead)
#include <algorithm>
#include <type_traits>

#include "kvrt/engine/cuda/bulk_copy.cuh"
#include "kvrt/engine/cuda/decode_linear_common.cuh"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda::detail {
namespace {

using namespace decode_linear;

constexpr int kConsumers = kWarps * 32;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
constexpr int kConsumerBarrier = 1;        // named barrier of the consumer warps
constexpr size_t kBarrierBytes = 2 * kMaxStages * sizeof(uint64_t);  // full[], empty[]

__device__ __forceinline__ void consumer_sync() {
  named_barrier(kConsumerBarrier, kConsumers);
}

// Where x lives: staged in shared memory, in registers, or in registers for one token
// (loaded and normalized over all lanes: load_x_registers_one_token).
enum XMode : int { kXStaged, kXRegisters, kXOneToken };

// The one-token kernels take their parameters with 128 aligned bytes appended: with the
// block so laid out, ptxas (CUDA 13.0) fits them in the 96 registers that two blocks
// per SM leave without spilling (12-24 bytes spilled with the plain block; the other
// kernels compile the same either way, and spill 8-12 bytes when the pad is in Params
// itself). Nothing reads the pad.
struct OneTokenParams : Params {
  alignas(128) unsigned char register_allocation_pad[128];
};
template <int kX>
using KernelParams = std::conditional_t<kX == kXOneToken, OneTokenParams, Params>;

template <int kEpilogue, bool kNorm, int kX>
__global__ void __launch_bounds__(kThreads, 2) ring_kernel(const KernelParams<kX> p) {
  constexpr bool kGlu = epilogue_kind(kEpilogue) == kSwiglu;
  constexpr bool kXInRegisters = kX != kXStaged;
  extern __shared__ uint4 smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);  // [kMaxStages]
  uint64_t* empty = full + kMaxStages;                 // [kMaxStages]
  char* ring = reinterpret_cast<char*>(smem) + kBarrierBytes;
  const int slot_bytes = kTileCols * p.row_stride;
  uint4* xs = reinterpret_cast<uint4*>(ring + static_cast<size_t>(p.stages) * slot_bytes);
  float* reduce =  // [2][warps][64]
      reinterpret_cast<float*>(xs + (kXInRegisters ? 0 : p.tokens * p.x_stride));

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // A contiguous run of tiles per block, sizes differing by at most one.
  const int first = static_cast<int>(static_cast<int64_t>(blockIdx.x) * p.tiles / gridDim.x);
  const int end = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * p.tiles / gridDim.x);
  const int total = (end - first) * p.parts;  // ring slots this block fills

  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], kConsumers);
    }
    barrier_init_fence();
  }
  __syncthreads();
  pdl_launch_dependents();

  if (warp == kWarps) {
    // Producer: lane r < 8 copies tile row r of each slot; with whole-row slots stored
    // unpadded (`contiguous`), lane 0 copies the tile's rows in one run (SwiGLU: lane 0
    // the gate rows, lane 4 the up rows). W is read once: evict-first in L2.
    const uint64_t w_policy = l2_evict_first_policy();
    for (int n = 0; n < total; ++n) {
      const int slot = n % p.stages;
      if (n >= p.stages) barrier_wait(&empty[slot], ((n / p.stages) - 1) & 1);
      const int tile = first + n / p.parts, k0 = (n % p.parts) * p.stage_keys;
      const int row = lane < kTileCols ? matrix_row<kGlu>(p, tile, lane) : -1;
      const uint32_t bytes = static_cast<uint32_t>(min(p.stage_keys, p.in - k0)) * 2u;
      const bf16* src = p.w + static_cast<size_t>(row < 0 ? 0 : row) * p.in + k0;
      const unsigned rows = __popc(__ballot_sync(0xffffffffu, row >= 0));
      if (lane == 0) barrier_arrive_expect_tx(&full[slot], rows * bytes);
      __syncwarp();
      char* dst = ring + slot * slot_bytes + lane * p.row_stride;
      if (!p.contiguous) {
        if (row >= 0) bulk_copy(dst, src, bytes, &full[slot], w_policy);
      } else if (row >= 0 && (lane == 0 || (kGlu && lane == 4))) {
        bulk_copy(dst, src, (kGlu ? rows / 2 : rows) * bytes, &full[slot], w_policy);
      }
    }
    return;
  }

  const int g = lane >> 2, t = lane & 3;
  const bool x_ok = g < p.tokens;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // Whole-row slots: lane (g, t) of warp w only ever multiplies chunks 4 (w + 8 u) + t of
  // token g, so x goes straight into registers (load_x_registers; one token:
  // load_x_registers_one_token). The second reduction buffer is the norm's scratch: the
  // first tile's partials go to the first, and the second is written only after the
  // first tile's barrier.
  auto chunk = [&](int u) { return 4 * (warp + u * kWarps) + t; };
  uint4 xr[kXInRegisters ? kRegisterSteps : 1];
  if constexpr (kX == kXOneToken) {
    uint4 gamma0 = zero;  // this lane's chunk of the norm weight (loaded before the wait)
    if constexpr (kNorm) {
      const int c = chunk(lane >> 2);
      if (c < p.chunks) gamma0 = reinterpret_cast<const uint4*>(p.norm_w)[c];
    }
    pdl_wait();
    load_x_registers_one_token<kNorm>(p, xr, gamma0, chunk, reduce + kWarps * 64, consumer_sync);
  } else if constexpr (kX == kXRegisters) {
    uint4 gamma[kRegisterSteps] = {};
    if constexpr (kNorm) load_gamma_registers(p, gamma, chunk);
    pdl_wait();
    load_x_registers<kNorm>(p, xr, gamma, chunk, reduce + kWarps * 64, consumer_sync);
  } else {
    uint4 gamma[4] = {};  // in <= 8192 without loads after the wait
    if constexpr (kNorm) load_staged_gamma<kConsumers>(p, gamma, threadIdx.x);
    pdl_wait();
    stage_x<kNorm, kConsumers, 8>(p, xs, reduce, threadIdx.x, gamma, consumer_sync);
    consumer_sync();
  }
  const uint4* x_row = xs + (x_ok ? g : 0) * p.x_stride;
  // The epilogue: thread (token, j) writes output j of each tile; its addend (residual,
  // bias) is loaded a tile ahead.
  constexpr int kOutputs = outputs_per_tile<kEpilogue>();
  const bool writer = threadIdx.x < kMaxTokens * kOutputs;
  const int out_token = threadIdx.x / kOutputs, out_col = threadIdx.x % kOutputs;
  auto addend_of = [&](int tile) {
    return writer && tile < end ? load_addend<kEpilogue>(p, out_token, tile * kOutputs + out_col)
                                : Addend<kEpilogue>(0);
  };
  Addend<kEpilogue> addend = addend_of(first);
  unsigned long long best = 0;  // kArgmax: the key of the best output this thread wrote
  // acc[0..1]: token g, tile columns 2t and 2t+1 (acc[2..3] are the MMA's zero rows).
  // Two reduction buffers alternate, so one barrier per tile suffices: a warp writes a
  // buffer again only after passing the barrier that follows the last reads of it.
  auto finish_tile = [&](int tile, int buffer, const float(&acc)[4]) {
    float* partial = reduce + buffer * (kWarps * 64);
    reinterpret_cast<float2*>(partial + warp * 64)[g * 4 + t] = make_float2(acc[0], acc[1]);
    consumer_sync();
    if (writer) {
      float sum = 0.0f, up = 0.0f;
#pragma unroll
      for (int v = 0; v < kWarps; ++v) {
        sum += partial[v * 64 + out_token * kTileCols + out_col];
        if constexpr (kGlu) up += partial[v * 64 + out_token * kTileCols + 4 + out_col];
      }
      const int out_row = tile * kOutputs + out_col;
      store_output<kEpilogue>(p, out_token, out_row, sum, up, addend);
      if constexpr (has_argmax(kEpilogue)) {
        const unsigned long long key = argmax_key(sum, out_row);
        if (out_token == 0 && out_row < p.rows && key > best) best = key;
      }
      addend = addend_of(tile + 1);
    }
  };
  int slot = 0;
  uint32_t parity = 0;
  auto next_slot = [&] {
    if (++slot == p.stages) {
      slot = 0;
      parity ^= 1u;
    }
  };

  // Both paths split each k-step's two MMAs over two accumulators: half as long a chain
  // of dependent MMAs.
  if constexpr (kXInRegisters) {
    for (int tile = first, buffer = 0; tile < end; ++tile, buffer ^= 1) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      barrier_wait(&full[slot], parity);
      const char* w_row = ring + slot * slot_bytes + g * p.row_stride;
#pragma unroll
      for (int u = 0; u < kRegisterSteps; ++u) {
        const int c = chunk(u);
        const uint4 wv = c < p.chunks ? *reinterpret_cast<const uint4*>(w_row + c * 16) : zero;
        mma_bf16(acc, xr[u].x, 0u, xr[u].y, 0u, wv.x, wv.y);
        mma_bf16(acc2, xr[u].z, 0u, xr[u].w, 0u, wv.z, wv.w);
      }
      barrier_arrive(&empty[slot]);  // every lane: its reads of the slot are done
      next_slot();
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] += acc2[i];
      finish_tile(tile, buffer, acc);
    }
  } else {
    for (int tile = first, buffer = 0; tile < end; ++tile, buffer ^= 1) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int part = 0; part < p.parts; ++part) {
        barrier_wait(&full[slot], parity);
        const int k0_chunk = part * (p.stage_keys / 8);
        const int chunks = min(p.stage_keys, p.in - part * p.stage_keys) / 8;
        const int steps = ceil_div(chunks, 4);
        const char* w_row = ring + slot * slot_bytes + g * p.row_stride;
#pragma unroll 4
        for (int j = warp; j < steps; j += kWarps) {
          const int c = 4 * j + t;
          const bool valid = c < chunks;
          const uint4 wv = valid ? *reinterpret_cast<const uint4*>(w_row + c * 16) : zero;
          const uint4 xv = valid && x_ok ? x_row[k0_chunk + c] : zero;
          mma_bf16(acc, xv.x, 0u, xv.y, 0u, wv.x, wv.y);
          mma_bf16(acc2, xv.z, 0u, xv.w, 0u, wv.z, wv.w);
        }
        barrier_arrive(&empty[slot]);  // every lane: its reads of the slot are done
        next_slot();
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] += acc2[i];
      finish_tile(tile, buffer, acc);
    }
  }
  // The writers of token 0 are lanes 0..kOutputs-1 of warp 0, done with every tile.
  if constexpr (has_argmax(kEpilogue)) {
    if (warp == 0) finish_argmax(p, best);
  }
}

template <int kEpilogue, bool kNorm, int kX>
Status launch_ring(const Params& p, int grid, cudaStream_t stream) {
  void (*kernel)(KernelParams<kX>) = ring_kernel<kEpilogue, kNorm, kX>;
  const size_t smem = decode_linear_ring_smem(p);
  KVRT_RETURN_IF_ERROR(
      allow_shared_memory(reinterpret_cast<const void*>(kernel), smem, "decode_linear"));
  KernelParams<kX> args{};
  static_cast<Params&>(args) = p;
  return launch(kernel, dim3(grid), dim3(kThreads), smem, stream, "decode_linear", args);
}

template <int kEpilogue, int kX>
Status launch_norm(const Params& p, bool norm, int grid, cudaStream_t stream) {
  return norm ? launch_ring<kEpilogue, true, kX>(p, grid, stream)
              : launch_ring<kEpilogue, false, kX>(p, grid, stream);
}

template <int kEpilogue>
Status launch_x(const Params& p, bool norm, int x_mode, int grid, cudaStream_t stream) {
  return x_mode == kXOneToken    ? launch_norm<kEpilogue, kXOneToken>(p, norm, grid, stream)
         : x_mode == kXRegisters ? launch_norm<kEpilogue, kXRegisters>(p, norm, grid, stream)
                                 : launch_norm<kEpilogue, kXStaged>(p, norm, grid, stream);
}

}  // namespace

size_t decode_linear_ring_smem(const Params& p) {
  const size_t x_bytes =
      ring_x_in_registers(p) ? 0 : static_cast<size_t>(p.tokens) * p.x_stride * sizeof(uint4);
  return kBarrierBytes + static_cast<size_t>(p.stages) * kTileCols * p.row_stride + x_bytes +
         kReduceBytes;
}

Status launch_decode_linear_ring(const Params& p, int epilogue, bool norm,
                                 const DecodeLinearTuning& tuning, cudaStream_t stream) {
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const int grid = decode_linear_grid(p.tiles, std::max(1, tuning.blocks_per_sm) * sms,
                                      tuning.balanced_grid > 0);
  // One token's x over all lanes: one load and one chunk of normalization per lane where
  // token 0's lanes would take eight. On the H200 it is faster at every one-token shape
  // (q/k/v, where the launch waits on x: 3.72 -> 3.05 us for TinyLlama; gate/up and the
  // LM heads, where W streams on: 0.6-3.1%, since the one-token kernels stopped spilling).
  const bool one_token = p.tokens == 1 && tuning.one_token_x != 0;
  const int x_mode = !ring_x_in_registers(p) ? kXStaged : one_token ? kXOneToken : kXRegisters;
  // The LM head's own instantiations (no other kernel has them), one token's x modes only:
  // x in registers is the one-token kind (with x_mode kXRegisters it spilled).
  if (has_argmax(epilogue)) {
    constexpr int kGreedy = kStoreF32 | kArgmax;
    return x_mode == kXStaged ? launch_norm<kGreedy, kXStaged>(p, norm, grid, stream)
                              : launch_norm<kGreedy, kXOneToken>(p, norm, grid, stream);
  }
  return with_epilogue(epilogue, [&](auto kEpilogue) {
    return launch_x<kEpilogue()>(p, norm, x_mode, grid, stream);
  });
}

}  // namespace kvrt::engine::cuda::detail
