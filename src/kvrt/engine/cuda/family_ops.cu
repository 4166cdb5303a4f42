// Model-family ops the fused Llama path does not cover: RMSNorm over rows of any width
// (Llama or Gemma rounding, residual add, per-head rows inside the fused qkv), GeGLU,
// an in-place bf16 scale, and the final logit softcap with the greedy argmax fused in.
#include <algorithm>
#include <climits>
#include <cmath>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

// ---------------------------------------------------------------------------------------
// row_norm

// A row's elements per thread held in registers on the 16-byte path, in 8-element chunks:
// a warp per row covers 1024 elements (head_dim rows, small hidden sizes), a block per row
// 8192 (hidden sizes up to Gemma 3 27B's 5376 and beyond).
constexpr int kNormChunks = 4;
constexpr int kWarpRowMax = 32 * 8 * kNormChunks;
constexpr int kBlockRowMax = kThreads * 8 * kNormChunks;

// Sum over the kRowThreads threads of one row (a warp, or the whole block); every one of
// them gets the total. `scratch` holds kThreads / 32 floats (unused for a warp).
template <int kRowThreads>
__device__ __forceinline__ float row_sum(float v, float* scratch) {
  v = warp_sum(v);
  if constexpr (kRowThreads == 32) {
    return v;
  } else {
    static_assert(kRowThreads == kThreads, "a row is one warp or one block");
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
    return total;
  }
}

// One normalized element with HF's rounding points, as a float holding a bf16 value:
// LlamaRMSNorm rounds x·r to the input dtype before the weight; GemmaRMSNorm stays in f32
// through (1 + w) and rounds once.
__device__ __forceinline__ float norm_element(float x, float w, float inv_rms, bool unit_offset) {
  return unit_offset ? round_bf16(x * inv_rms * (1.0f + w))
                     : round_bf16(round_bf16(x * inv_rms) * w);
}

// The residual add on bf16 tensors: the normed value is already rounded, the sum rounds.
__device__ __forceinline__ float add_residual(float normed, float residual) {
  return round_bf16(residual + normed);
}

// The element offset of row `row` (token row / rows_per_token, head row % rows_per_token).
__device__ __forceinline__ int64_t row_offset(const RowNorm& op, int row) {
  const int token = row / op.rows_per_token, head = row - token * op.rows_per_token;
  return token * op.token_stride + static_cast<int64_t>(head) * op.width;
}

// The 16-byte path (width, token_stride multiples of 8, every pointer 16-byte aligned,
// width <= kRowThreads · 8 · kNormChunks): a thread reads its chunks of the row (and of
// the residual row) into registers, then writes the results from them, so out may be x
// and the residual may be out. `op.token_stride` is resolved (never 0).
template <int kRowThreads>
__global__ void __launch_bounds__(kThreads) row_norm_chunks_kernel(const RowNorm op) {
  __shared__ float scratch[kThreads / 32];
  pdl_launch_dependents();
  const int chunks = op.width / 8;
  const int lane = static_cast<int>(threadIdx.x) % kRowThreads;
  const uint4* weight = reinterpret_cast<const uint4*>(op.weight);
  uint4 gamma[kNormChunks];
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k) {  // constant: loaded while the predecessor drains
    const int c = lane + k * kRowThreads;
    gamma[k] = c < chunks ? weight[c] : make_uint4(0, 0, 0, 0);
  }
  pdl_wait();
  const int row = static_cast<int>(blockIdx.x) * (kThreads / kRowThreads) +
                  static_cast<int>(threadIdx.x) / kRowThreads;
  // Uniform over the row's threads (all of a block's for a block per row): no thread
  // that stays waits on one that left.
  if (row >= op.tokens * op.rows_per_token) return;
  const uint4* x = reinterpret_cast<const uint4*>(op.x + row_offset(op, row));
  uint4 v[kNormChunks], res[kNormChunks];
  float squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k) {
    const int c = lane + k * kRowThreads;
    v[k] = c < chunks ? x[c] : make_uint4(0, 0, 0, 0);
  }
  const bool has_residual = op.residual != nullptr;
  const uint4* residual = reinterpret_cast<const uint4*>(
      has_residual ? op.residual + static_cast<int64_t>(row) * op.width : op.x);
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k) {  // in flight during the reduction
    const int c = lane + k * kRowThreads;
    res[k] = has_residual && c < chunks ? residual[c] : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k) squares += sum_of_squares(v[k]);
  const float inv_rms =
      rsqrtf(row_sum<kRowThreads>(squares, scratch) / static_cast<float>(op.width) + op.eps);
  uint4* out = reinterpret_cast<uint4*>(op.out + row_offset(op, row));
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k) {
    const int c = lane + k * kRowThreads;
    if (c >= chunks) break;
    const uint32_t in[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
    const uint32_t g[4] = {gamma[k].x, gamma[k].y, gamma[k].z, gamma[k].w};
    const uint32_t r[4] = {res[k].x, res[k].y, res[k].z, res[k].w};
    uint32_t result[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float lo = norm_element(bf16_lo(in[j]), bf16_lo(g[j]), inv_rms, op.unit_offset);
      float hi = norm_element(bf16_hi(in[j]), bf16_hi(g[j]), inv_rms, op.unit_offset);
      if (has_residual) {
        lo = add_residual(lo, bf16_lo(r[j]));
        hi = add_residual(hi, bf16_hi(r[j]));
      }
      result[j] = pack_bf16(lo, hi);
    }
    out[c] = make_uint4(result[0], result[1], result[2], result[3]);
  }
}

// The element path, for any width and alignment: two passes over the row, each element
// read (x, residual) and written by the same thread, so out may be x and residual out.
template <int kRowThreads>
__global__ void __launch_bounds__(kThreads) row_norm_kernel(const RowNorm op) {
  __shared__ float scratch[kThreads / 32];
  pdl_launch_dependents();
  pdl_wait();
  const int row = static_cast<int>(blockIdx.x) * (kThreads / kRowThreads) +
                  static_cast<int>(threadIdx.x) / kRowThreads;
  if (row >= op.tokens * op.rows_per_token) return;  // uniform over the row's threads
  const int lane = static_cast<int>(threadIdx.x) % kRowThreads;
  const int64_t base = row_offset(op, row);
  float squares = 0.0f;
  for (int i = lane; i < op.width; i += kRowThreads) {
    const float v = __bfloat162float(op.x[base + i]);
    squares += v * v;
  }
  const float inv_rms =
      rsqrtf(row_sum<kRowThreads>(squares, scratch) / static_cast<float>(op.width) + op.eps);
  const int64_t residual_base = static_cast<int64_t>(row) * op.width;
  for (int i = lane; i < op.width; i += kRowThreads) {
    float y = norm_element(__bfloat162float(op.x[base + i]), __bfloat162float(op.weight[i]),
                           inv_rms, op.unit_offset);
    if (op.residual != nullptr)
      y = add_residual(y, __bfloat162float(op.residual[residual_base + i]));
    op.out[base + i] = __float2bfloat16(y);
  }
}

// ---------------------------------------------------------------------------------------
// geglu

// PyTorch's gelu(approximate="tanh") in f32 (its opmath for bf16, same expression order),
// rounded to bf16 as the activation's output is, times up (the caller rounds the product).
__device__ __forceinline__ float geglu_value(float gate, float up) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  constexpr float kKappa = 0.044715f;
  const float cube = gate * gate * gate;
  const float inner = kBeta * (gate + kKappa * cube);
  return round_bf16(0.5f * gate * (1.0f + tanhf(inner))) * up;
}

// gate_up [tokens, 2 * inter] -> out [tokens, inter]. The element path.
__global__ void __launch_bounds__(kThreads)
    geglu_kernel(const bf16* gate_up, bf16* out, int tokens, int inter) {
  pdl_launch_dependents();
  pdl_wait();
  const size_t total = static_cast<size_t>(tokens) * inter;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    const size_t token = i / inter, j = i - token * inter;
    const float gate = __bfloat162float(gate_up[token * 2 * inter + j]);
    const float up = __bfloat162float(gate_up[token * 2 * inter + inter + j]);
    out[i] = __float2bfloat16(geglu_value(gate, up));
  }
}

// The 16-byte path (inter a multiple of 8), as swiglu's: 8 outputs per item,
// kGegluItems items per thread with every load issued before the first store.
constexpr int kGegluItems = 2;

__global__ void __launch_bounds__(kThreads)
    geglu_chunks_kernel(const uint4* __restrict__ gate_up, uint4* __restrict__ out, unsigned total,
                        unsigned chunks) {
  pdl_launch_dependents();
  pdl_wait();
  const unsigned stride = gridDim.x * kThreads;
  for (unsigned first = blockIdx.x * kThreads + threadIdx.x; first < total;
       first += kGegluItems * stride) {
    uint4 gate[kGegluItems], up[kGegluItems];
#pragma unroll
    for (int k = 0; k < kGegluItems; ++k) {
      const unsigned i = first + k * stride;
      const unsigned token = i / chunks, c = i - token * chunks;
      const size_t row = static_cast<size_t>(token) * 2 * chunks;
      gate[k] = i < total ? gate_up[row + c] : make_uint4(0, 0, 0, 0);
      up[k] = i < total ? gate_up[row + chunks + c] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kGegluItems; ++k) {
      const unsigned i = first + k * stride;
      if (i >= total) break;
      const uint32_t g[4] = {gate[k].x, gate[k].y, gate[k].z, gate[k].w};
      const uint32_t u[4] = {up[k].x, up[k].y, up[k].z, up[k].w};
      uint32_t result[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        result[j] = pack_bf16(geglu_value(bf16_lo(g[j]), bf16_lo(u[j])),
                              geglu_value(bf16_hi(g[j]), bf16_hi(u[j])));
      }
      out[i] = make_uint4(result[0], result[1], result[2], result[3]);
    }
  }
}

// ---------------------------------------------------------------------------------------
// scale_bf16

// x[i] = bf16(x[i] * factor), grid-stride. vectorized (x 16-byte aligned): 8 elements
// per 16-byte chunk, the count % 8 tail elements by the first threads of the grid.
__global__ void __launch_bounds__(kThreads)
    scale_kernel(bf16* x, size_t count, float factor, bool vectorized) {
  pdl_launch_dependents();
  pdl_wait();
  const size_t first = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads;
  size_t done = 0;
  if (vectorized) {
    uint4* chunks = reinterpret_cast<uint4*>(x);
    done = count / 8 * 8;
    for (size_t i = first; i < count / 8; i += stride) {
      const uint4 v = chunks[i];
      const uint32_t in[4] = {v.x, v.y, v.z, v.w};
      uint32_t result[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        result[j] = pack_bf16(bf16_lo(in[j]) * factor, bf16_hi(in[j]) * factor);
      }
      chunks[i] = make_uint4(result[0], result[1], result[2], result[3]);
    }
  }
  for (size_t i = done + first; i < count; i += stride) {
    x[i] = __float2bfloat16(__bfloat162float(x[i]) * factor);
  }
}

// ---------------------------------------------------------------------------------------
// softcap_logits

constexpr int kSoftcapThreads = 1024;
constexpr int kSoftcapItems = 4;  // float4 loads in flight per thread

// A value as one 64-bit key whose unsigned order is torch.argmax's: the value's bits made
// monotonic (NaN above +inf, -0 as +0, which compare equal), then the complement of the
// index, so that of equal values the lowest index wins. Never zero: zero is "none yet".
__device__ __forceinline__ unsigned long long argmax_key(float value, int index) {
  const uint32_t bits = __float_as_uint(value == 0.0f ? 0.0f : value);
  const uint32_t ordered = value != value              ? 0xffffffffu
                           : (bits & 0x80000000u) != 0 ? ~bits
                                                       : bits | 0x80000000u;
  return (static_cast<unsigned long long>(ordered) << 32) | ~static_cast<uint32_t>(index);
}

// HF's logits / cap, tanh, * cap, each rounded in f32.
__device__ __forceinline__ float softcap(float x, float cap) {
  return tanhf(x / cap) * cap;
}

__device__ __forceinline__ unsigned long long max_key(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}

// Grid-stride over the logits, in place; with argmax_out (launched as one block) the
// block also reduces the keys of the values it wrote and writes the winner's index.
// vectorized (logits 16-byte aligned): float4 chunks, then the count % 4 tail.
__global__ void __launch_bounds__(kSoftcapThreads)
    softcap_kernel(float* logits, int count, float cap, int32_t* argmax_out, bool vectorized) {
  __shared__ unsigned long long warp_best[kSoftcapThreads / 32];
  pdl_launch_dependents();
  pdl_wait();
  const int first = static_cast<int>(blockIdx.x * kSoftcapThreads + threadIdx.x);
  const int stride = static_cast<int>(gridDim.x) * kSoftcapThreads;
  unsigned long long best = 0;
  int done = 0;
  if (vectorized) {
    float4* chunks = reinterpret_cast<float4*>(logits);
    const int n = count / 4;
    done = n * 4;
    for (int base = first; base < n; base += kSoftcapItems * stride) {
      float4 v[kSoftcapItems];
#pragma unroll
      for (int k = 0; k < kSoftcapItems; ++k) {  // every load before the first store
        const int i = base + k * stride;
        v[k] = i < n ? chunks[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int k = 0; k < kSoftcapItems; ++k) {
        const int i = base + k * stride;
        if (i >= n) break;
        float4 c = v[k];
        c.x = softcap(c.x, cap);
        c.y = softcap(c.y, cap);
        c.z = softcap(c.z, cap);
        c.w = softcap(c.w, cap);
        chunks[i] = c;
        best =
            max_key(best, max_key(max_key(argmax_key(c.x, 4 * i), argmax_key(c.y, 4 * i + 1)),
                                  max_key(argmax_key(c.z, 4 * i + 2), argmax_key(c.w, 4 * i + 3))));
      }
    }
  }
  for (int i = done + first; i < count; i += stride) {
    const float c = softcap(logits[i], cap);
    logits[i] = c;
    best = max_key(best, argmax_key(c, i));
  }
  if (argmax_out == nullptr) return;  // uniform: the launch's argument
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    best = max_key(best, __shfl_xor_sync(0xffffffffu, best, offset));
  }
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x >= 32) return;
  best = warp_best[threadIdx.x];
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    best = max_key(best, __shfl_xor_sync(0xffffffffu, best, offset));
  }
  if (threadIdx.x == 0) *argmax_out = static_cast<int32_t>(~static_cast<uint32_t>(best));
}

static_assert(kSoftcapThreads / 32 == 32, "one warp reduces the warps' bests");

}  // namespace

Status row_norm(const RowNorm& op, cudaStream_t stream) {
  if (op.x == nullptr || op.out == nullptr || op.weight == nullptr) {
    return invalid_argument("row_norm: x, out and weight must be non-null");
  }
  if (op.tokens < 1 || op.rows_per_token < 1 || op.width < 1) {
    return invalid_argument("row_norm: tokens, rows_per_token and width must be positive, got ",
                            op.tokens, ", ", op.rows_per_token, " and ", op.width);
  }
  const int64_t rows = static_cast<int64_t>(op.tokens) * op.rows_per_token;
  const int64_t dense = static_cast<int64_t>(op.rows_per_token) * op.width;
  if (rows > INT_MAX || dense > INT_MAX) {
    return invalid_argument("row_norm: tokens · rows_per_token · width too large");
  }
  if (op.token_stride != 0 && op.token_stride < dense) {
    return invalid_argument("row_norm: token_stride ", op.token_stride,
                            " must be 0 or at least rows_per_token · width = ", dense);
  }
  RowNorm p = op;
  p.token_stride = op.token_stride != 0 ? op.token_stride : dense;
  const size_t span = ((op.tokens - 1) * p.token_stride + dense) * sizeof(bf16);
  if (op.out != op.x && overlaps(op.x, span, op.out, span)) {
    return invalid_argument("row_norm: out must be x or not overlap it");
  }
  if (op.residual != nullptr &&
      overlaps(op.residual, static_cast<size_t>(rows * op.width) * sizeof(bf16), op.out, span) &&
      (op.residual != op.out || p.token_stride != dense)) {
    return invalid_argument(
        "row_norm: residual must not overlap out, or be out with rows back to back "
        "(token_stride 0)");
  }
  const bool aligned = is_aligned(op.x, 16) && is_aligned(op.out, 16) &&
                       is_aligned(op.weight, 16) &&
                       (op.residual == nullptr || is_aligned(op.residual, 16));
  const bool chunks =
      aligned && op.width % 8 == 0 && p.token_stride % 8 == 0 && op.width <= kBlockRowMax;
  const int row_count = static_cast<int>(rows);
  if (op.width <= kWarpRowMax) {  // a warp per row, 8 rows per block
    const dim3 grid(ceil_div(row_count, kThreads / 32));
    return chunks
               ? launch(row_norm_chunks_kernel<32>, grid, dim3(kThreads), 0, stream, "row_norm", p)
               : launch(row_norm_kernel<32>, grid, dim3(kThreads), 0, stream, "row_norm", p);
  }
  return chunks ? launch(row_norm_chunks_kernel<kThreads>, dim3(row_count), dim3(kThreads), 0,
                         stream, "row_norm", p)
                : launch(row_norm_kernel<kThreads>, dim3(row_count), dim3(kThreads), 0, stream,
                         "row_norm", p);
}

Status geglu(const bf16* gate_up, bf16* out, int tokens, int intermediate, cudaStream_t stream) {
  if (gate_up == nullptr || out == nullptr) {
    return invalid_argument("geglu: gate_up and out must be non-null");
  }
  if (tokens < 1 || intermediate < 1) {
    return invalid_argument("geglu: tokens and intermediate must be positive");
  }
  const size_t total = static_cast<size_t>(tokens) * intermediate;
  if (overlaps(gate_up, 2 * total * sizeof(bf16), out, total * sizeof(bf16))) {
    return invalid_argument("geglu: out must not overlap gate_up");
  }
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const size_t max_blocks = static_cast<size_t>(sms) * 8;
  const size_t chunk_items = total / 8;
  if (intermediate % 8 == 0 && chunk_items < (size_t{1} << 31) && is_aligned(gate_up, 16) &&
      is_aligned(out, 16)) {
    const size_t per_block = static_cast<size_t>(kThreads) * kGegluItems;
    const size_t blocks = std::min((chunk_items + per_block - 1) / per_block, max_blocks);
    return launch(geglu_chunks_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                  stream, "geglu", reinterpret_cast<const uint4*>(gate_up),
                  reinterpret_cast<uint4*>(out), static_cast<unsigned>(chunk_items),
                  static_cast<unsigned>(intermediate / 8));
  }
  const size_t blocks = std::min<size_t>((total + kThreads - 1) / kThreads, max_blocks);
  return launch(geglu_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                "geglu", gate_up, out, tokens, intermediate);
}

Status scale_bf16(bf16* x, size_t count, float factor, cudaStream_t stream) {
  if (x == nullptr) return invalid_argument("scale_bf16: x must be non-null");
  if (count < 1) return invalid_argument("scale_bf16: count must be positive");
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const bool vectorized = is_aligned(x, 16);
  const size_t items = vectorized ? std::max<size_t>(count / 8, 1) : count;
  const size_t blocks =
      std::min<size_t>((items + kThreads - 1) / kThreads, static_cast<size_t>(sms) * 8);
  return launch(scale_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                "scale_bf16", x, count, factor, vectorized);
}

Status softcap_logits(float* logits, int count, float cap, int32_t* argmax_out,
                      cudaStream_t stream) {
  if (logits == nullptr) return invalid_argument("softcap_logits: logits must be non-null");
  if (count < 1) return invalid_argument("softcap_logits: count must be positive, got ", count);
  if (!(cap > 0.0f) || !std::isfinite(cap)) {
    return invalid_argument("softcap_logits: cap must be positive and finite, got ", cap);
  }
  if (argmax_out != nullptr &&
      (!is_aligned(argmax_out, alignof(int32_t)) ||
       overlaps(argmax_out, sizeof(int32_t), logits, static_cast<size_t>(count) * sizeof(float)))) {
    return invalid_argument("softcap_logits: argmax_out must be int32-aligned, outside logits");
  }
  const bool vectorized = is_aligned(logits, 16);
  int blocks = 1;  // the argmax is reduced within one block
  if (argmax_out == nullptr) {
    KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
    const int per_block = kSoftcapThreads * (vectorized ? 4 * kSoftcapItems : 1);
    blocks = std::min(ceil_div(count, per_block), sms * 2);
  }
  return launch(softcap_kernel, dim3(blocks), dim3(kSoftcapThreads), 0, stream, "softcap_logits",
                logits, count, cap, argmax_out, vectorized);
}

}  // namespace kvrt::engine::cuda
