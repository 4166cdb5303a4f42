// Decode-shaped linear layers: y[t, r] = sum_k W[r, k] * x[t, k] for 1..8 token vectors,
// W [rows, in] streamed from HBM exactly once with 128-bit loads.
//
// A tensor-core GEMV. The (up to 8) token vectors are the M side of mma.m16n8k16 (its
// rows 8..15 stay zero) and 8 weight rows are the N side. The order of k inside a dot
// product is free, so each lane loads 16 contiguous bytes of one W row (k = 8c..8c+7)
// and the matching 16 bytes of x, and feeds them as the fragments of two k16 MMAs: the
// logical-k <-> physical-k permutation is the same for both operands.
//
//   block tile: the MMA's 8 columns = 8 rows of W (SwiGLU: 4 gate rows + the 4 up rows
//               of the same outputs, so the epilogue finds both in one tile)
//   warp w:     k-steps w, w+8, w+16, ... of 32 k; lane (g, t) reads row g, chunk 4s+t
//   then:       8 warp partials -> shared memory -> 64 (32) outputs -> epilogue
//
// W reaches registers through a per-warp ring of kStages shared-memory slots filled by
// cp.async: each lane streams its own 16-byte chunks, kStages - 1 of them in flight, and
// the stream runs on across the block's tiles. (Plain loads into registers were
// scheduled one at a time by ptxas, right before their MMA.) Blocks are persistent (as
// many as fit at once) and walk the tiles, so x is staged in shared memory (and
// RMS-normalized) once per block. Before pdl_wait() each block asks L2 for its first
// tile of W and starts its ring: W is constant, so that work overlaps the previous
// kernel's tail.
#include <algorithm>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/launch.h"
#include "kvrt/engine/cuda/mma.cuh"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileCols = 8;   // W rows per block tile: the MMA's N
constexpr int kMaxTokens = 8;  // the MMA's M rows that carry data
constexpr int kStages = 16;    // ring slots per warp: 15 chunks in flight per lane
constexpr size_t kRingBytes = static_cast<size_t>(kWarps) * kStages * 32 * sizeof(uint4);
constexpr size_t kReduceBytes = 2 * kWarps * 64 * sizeof(float);
constexpr size_t kMaxStagedBytes = 144 * 1024;

enum Epilogue : int { kStore, kResidual, kStoreF32, kSwiglu };

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
};

// Copies x into shared memory as bf16, normalized when kNorm (HF LlamaRMSNorm rounding:
// bf16(bf16(x * inv_rms) * gamma)). `scratch` holds >= 72 floats. When x fits in four
// 16-byte chunks per thread, the normalizing path reads it once into registers (one
// trip to L2 instead of two).
template <bool kNorm>
__device__ void stage_x(const Params& p, uint4* xs, float* scratch) {
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  const int total = p.tokens * p.chunks;
  if constexpr (!kNorm) {
    for (int i = threadIdx.x; i < total; i += kThreads) {
      const int token = i / p.chunks;
      xs[token * p.x_stride + (i - token * p.chunks)] = x[i];
    }
  } else {
    constexpr int kHeld = 4;
    const bool held = total <= kHeld * kThreads;
    float squares[kMaxTokens] = {};
    auto add_squares = [&](const uint4& value, int token) {
      const uint32_t pairs[4] = {value.x, value.y, value.z, value.w};
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float lo = bf16_lo(pairs[j]), hi = bf16_hi(pairs[j]);
        sum += lo * lo + hi * hi;
      }
#pragma unroll
      for (int k = 0; k < kMaxTokens; ++k) squares[k] += k == token ? sum : 0.0f;
    };
    uint4 v[kHeld];
    if (held) {
#pragma unroll
      for (int k = 0; k < kHeld; ++k) {
        const int i = threadIdx.x + k * kThreads;
        v[k] = i < total ? x[i] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int k = 0; k < kHeld; ++k) {
        const int i = threadIdx.x + k * kThreads;
        if (i < total) add_squares(v[k], i / p.chunks);
      }
    } else {
      for (int i = threadIdx.x; i < total; i += kThreads) add_squares(x[i], i / p.chunks);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int token = 0; token < kMaxTokens; ++token) {
      const float sum = warp_sum(squares[token]);
      if (lane == 0) scratch[warp * kMaxTokens + token] = sum;
    }
    __syncthreads();
    if (threadIdx.x < p.tokens) {
      float sum = 0.0f;
      for (int w = 0; w < kWarps; ++w) sum += scratch[w * kMaxTokens + threadIdx.x];
      scratch[kWarps * kMaxTokens + threadIdx.x] = rsqrtf(sum / static_cast<float>(p.in) + p.eps);
    }
    __syncthreads();
    const uint4* gamma = reinterpret_cast<const uint4*>(p.norm_w);
    auto store = [&](const uint4& value, int i) {
      const int token = i / p.chunks, c = i - token * p.chunks;
      const float inv_rms = scratch[kWarps * kMaxTokens + token];
      const uint4 gv = gamma[c];
      const uint32_t in_pairs[4] = {value.x, value.y, value.z, value.w};
      const uint32_t g_pairs[4] = {gv.x, gv.y, gv.z, gv.w};
      uint32_t out[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[j] = pack_bf16(round_bf16(bf16_lo(in_pairs[j]) * inv_rms) * bf16_lo(g_pairs[j]),
                           round_bf16(bf16_hi(in_pairs[j]) * inv_rms) * bf16_hi(g_pairs[j]));
      }
      xs[token * p.x_stride + c] = make_uint4(out[0], out[1], out[2], out[3]);
    };
    if (held) {
#pragma unroll
      for (int k = 0; k < kHeld; ++k) {
        const int i = threadIdx.x + k * kThreads;
        if (i < total) store(v[k], i);
      }
    } else {
      for (int i = threadIdx.x; i < total; i += kThreads) store(x[i], i);
    }
  }
}

// The W row that MMA column `col` of `tile` reads, or -1 past the matrix.
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

template <int kEpilogue, bool kNorm>
__global__ void __launch_bounds__(kThreads) decode_linear_kernel(const Params p) {
  constexpr bool kGlu = kEpilogue == kSwiglu;
  extern __shared__ uint4 smem[];
  uint4* ring = smem;                             // [warps][stages][32 lanes]
  uint4* xs = smem + kRingBytes / sizeof(uint4);  // [tokens][x_stride]
  float* reduce = reinterpret_cast<float*>(xs + p.tokens * p.x_stride);  // [2][warps][64]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int steps = ceil_div(p.chunks, 4);  // 32-wide k-steps per row
  const int my_steps = warp < steps ? ceil_div(steps - warp, kWarps) : 0;
  const int my_tiles = ceil_div(p.tiles - static_cast<int>(blockIdx.x), gridDim.x);
  const int total = my_steps * my_tiles;  // this warp's loads, over all its tiles
  uint4* my_ring = ring + warp * kStages * 32 + lane;

  // The load stream: load n goes to slot n % kStages; one commit group per load.
  int issued = 0, issue_step = 0, issue_tile = blockIdx.x, issue_slot = 0;
  auto issue_next = [&]() {
    if (issued < total) {
      const int row = matrix_row<kGlu>(p, issue_tile, g);
      const int c = (warp + issue_step * kWarps) * 4 + t;
      const bool valid = row >= 0 && c < p.chunks;
      const bf16* src = valid ? p.w + static_cast<size_t>(row) * p.in + c * 8 : p.w;
      cp_async_16(my_ring + issue_slot * 32, src, valid);
    }
    cp_async_commit();
    ++issued;
    issue_slot = issue_slot + 1 == kStages ? 0 : issue_slot + 1;
    if (++issue_step == my_steps) {
      issue_step = 0;
      issue_tile += gridDim.x;
    }
  };

  if (threadIdx.x < kTileCols) {
    const int row = matrix_row<kGlu>(p, blockIdx.x, threadIdx.x);
    if (row >= 0) {
      prefetch_l2(p.w + static_cast<size_t>(row) * p.in, static_cast<uint32_t>(p.in) * 2u);
    }
  }
  for (int n = 0; n < kStages - 1; ++n) issue_next();
  pdl_launch_dependents();
  pdl_wait();

  stage_x<kNorm>(p, xs, reduce);
  __syncthreads();

  const bool x_ok = g < p.tokens;
  const uint4* x_row = xs + (x_ok ? g : 0) * p.x_stride;
  int slot = 0, buffer = 0;
  for (int i = 0; i < my_tiles; ++i, buffer ^= 1) {
    const int tile = blockIdx.x + i * gridDim.x;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int step = 0; step < my_steps; ++step) {
      cp_async_wait<kStages - 2>();  // this thread's load for `step` has landed
      const uint4 wv = my_ring[slot * 32];
      const int c = (warp + step * kWarps) * 4 + t;
      const uint4 xv = (x_ok && c < p.chunks) ? x_row[c] : make_uint4(0, 0, 0, 0);
      mma_bf16(acc, xv.x, 0u, xv.y, 0u, wv.x, wv.y);
      mma_bf16(acc, xv.z, 0u, xv.w, 0u, wv.z, wv.w);
      slot = slot + 1 == kStages ? 0 : slot + 1;
      // Refills the slot read one step ago (its value is already in an issued MMA).
      issue_next();
    }
    // acc[0..1]: token g, tile columns 2t and 2t+1 (acc[2..3] are the MMA's zero rows).
    // Two reduction buffers alternate, so one barrier per tile suffices: a warp writes a
    // buffer again only after passing the barrier that follows the last reads of it.
    float* partial = reduce + buffer * (kWarps * 64);
    reinterpret_cast<float2*>(partial + warp * 64)[g * 4 + t] = make_float2(acc[0], acc[1]);
    __syncthreads();
    constexpr int kOutputs = kGlu ? kTileCols / 2 : kTileCols;
    if (threadIdx.x < kMaxTokens * kOutputs) {
      const int token = threadIdx.x / kOutputs, j = threadIdx.x % kOutputs;
      const int out_row = tile * kOutputs + j;
      float sum = 0.0f, up = 0.0f;
#pragma unroll
      for (int v = 0; v < kWarps; ++v) {
        sum += partial[v * 64 + token * kTileCols + j];
        if constexpr (kGlu) up += partial[v * 64 + token * kTileCols + 4 + j];
      }
      if (token < p.tokens && out_row < p.rows) {
        const size_t out = static_cast<size_t>(token) * p.rows + out_row;
        if constexpr (kEpilogue == kStore) {
          p.y[out] = __float2bfloat16(sum);
        } else if constexpr (kEpilogue == kResidual) {
          p.y[out] = __float2bfloat16(round_bf16(sum) + __bfloat162float(p.residual[out]));
        } else if constexpr (kEpilogue == kStoreF32) {
          p.y_f32[out] = sum;
        } else {
          const float gate = round_bf16(sum);
          const float silu = round_bf16(gate / (1.0f + expf(-gate)));
          p.y[out] = __float2bfloat16(silu * round_bf16(up));
        }
      }
    }
  }
  cp_async_wait<0>();
}

template <int kEpilogue>
void (*pick_kernel(bool norm))(Params) {
  return norm ? decode_linear_kernel<kEpilogue, true> : decode_linear_kernel<kEpilogue, false>;
}

Status validate(const DecodeLinear& op) {
  if (op.weight == nullptr) return invalid_argument("decode_linear: weight is null");
  if (op.input == nullptr) return invalid_argument("decode_linear: input is null");
  if ((op.output == nullptr) == (op.output_f32 == nullptr)) {
    return invalid_argument("decode_linear: set exactly one of output and output_f32");
  }
  if (op.tokens < 1 || op.tokens > kMaxTokens) {
    return invalid_argument("decode_linear: tokens must be in [1, 8], got ", op.tokens);
  }
  if (op.rows < 1) return invalid_argument("decode_linear: rows must be positive, got ", op.rows);
  if (op.in < 8 || op.in % 8 != 0) {
    return invalid_argument("decode_linear: in must be a positive multiple of 8, got ", op.in);
  }
  if (!is_aligned(op.weight, 16) || !is_aligned(op.input, 16) || !is_aligned(op.norm_weight, 16)) {
    return invalid_argument("decode_linear: weight, input and norm_weight must be 16-byte aligned");
  }
  if (op.output_f32 != nullptr && (op.residual != nullptr || op.swiglu)) {
    return invalid_argument("decode_linear: output_f32 takes no residual and no swiglu");
  }
  if (op.swiglu && op.residual != nullptr) {
    return invalid_argument("decode_linear: swiglu takes no residual");
  }
  const size_t out_bytes = static_cast<size_t>(op.tokens) * op.rows *
                           (op.output_f32 != nullptr ? sizeof(float) : sizeof(bf16));
  const void* out = op.output_f32 != nullptr ? static_cast<const void*>(op.output_f32)
                                             : static_cast<const void*>(op.output);
  const size_t in_bytes = static_cast<size_t>(op.tokens) * op.in * sizeof(bf16);
  if (overlaps(out, out_bytes, op.input, in_bytes)) {
    return invalid_argument("decode_linear: output must not overlap input");
  }
  if (in_bytes > kMaxStagedBytes) {
    return not_supported("decode_linear: tokens * in * 2 = ", in_bytes,
                         " bytes exceeds the shared-memory staging limit of ", kMaxStagedBytes);
  }
  return Status();
}

}  // namespace

Status decode_linear(const DecodeLinear& op, cudaStream_t stream) {
  KVRT_RETURN_IF_ERROR(validate(op));
  Params p{};
  p.w = op.weight;
  p.x = op.input;
  p.norm_w = op.norm_weight;
  p.residual = op.residual;
  p.y = op.output;
  p.y_f32 = op.output_f32;
  p.tokens = op.tokens;
  p.rows = op.rows;
  p.in = op.in;
  p.chunks = op.in / 8;
  p.x_stride = p.chunks + (12 - p.chunks % 8) % 8;  // = 4 (mod 8): tokens g, g+1 hit other banks
  p.tiles = ceil_div(op.rows, op.swiglu ? kTileCols / 2 : kTileCols);
  p.eps = op.norm_eps;

  const bool norm = op.norm_weight != nullptr;
  void (*kernel)(Params) = nullptr;
  if (op.swiglu) {
    kernel = pick_kernel<kSwiglu>(norm);
  } else if (op.output_f32 != nullptr) {
    kernel = pick_kernel<kStoreF32>(norm);
  } else if (op.residual != nullptr) {
    kernel = pick_kernel<kResidual>(norm);
  } else {
    kernel = pick_kernel<kStore>(norm);
  }
  const size_t smem =
      kRingBytes + static_cast<size_t>(p.tokens) * p.x_stride * sizeof(uint4) + kReduceBytes;
  const void* key = reinterpret_cast<const void*>(kernel);
  KVRT_RETURN_IF_ERROR(allow_shared_memory(key, smem, "decode_linear"));
  KVRT_ASSIGN_OR_RETURN(int per_sm, resident_blocks(key, kThreads, smem));
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const int grid = std::min(p.tiles, per_sm * sms);
  return launch(kernel, dim3(grid), dim3(kThreads), smem, stream, "decode_linear", p);
}

}  // namespace kvrt::engine::cuda
