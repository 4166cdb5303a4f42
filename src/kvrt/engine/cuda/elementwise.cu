// Elementwise and gather kernels for the prefill path (decode folds RMSNorm and SwiGLU
// into the GEMV): RMSNorm, SwiGLU over a concatenated gate/up output, embedding gather.
#include <algorithm>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

// Sum over the block; every thread gets the total. `scratch` holds kThreads / 32 floats.
__device__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

// One block per token: x, y [tokens, hidden].
__global__ void __launch_bounds__(kThreads)
    rmsnorm_kernel(const bf16* x, const bf16* weight, bf16* y, int hidden, float eps) {
  __shared__ float scratch[kThreads / 32];
  pdl_launch_dependents();
  pdl_wait();
  const size_t base = static_cast<size_t>(blockIdx.x) * hidden;
  float squares = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    const float v = __bfloat162float(x[base + i]);
    squares += v * v;
  }
  const float inv_rms = rsqrtf(block_sum(squares, scratch) / static_cast<float>(hidden) + eps);
  // Each element is read and written by the same thread, so y may be x.
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    const float normed = round_bf16(__bfloat162float(x[base + i]) * inv_rms);
    y[base + i] = __float2bfloat16(normed * __bfloat162float(weight[i]));
  }
}

// gate_up [tokens, 2 * inter] -> out [tokens, inter].
__global__ void __launch_bounds__(kThreads)
    swiglu_kernel(const bf16* gate_up, bf16* out, int tokens, int inter) {
  pdl_launch_dependents();
  pdl_wait();
  const size_t total = static_cast<size_t>(tokens) * inter;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    const size_t token = i / inter, j = i - token * inter;
    const float gate = __bfloat162float(gate_up[token * 2 * inter + j]);
    const float up = __bfloat162float(gate_up[token * 2 * inter + inter + j]);
    const float silu = round_bf16(gate / (1.0f + expf(-gate)));
    out[i] = __float2bfloat16(silu * up);
  }
}

// One block per token id: out [count, hidden].
__global__ void __launch_bounds__(kThreads)
    embedding_kernel(const bf16* table, int vocab, int hidden, const int32_t* tokens, bf16* out,
                     bool vectorized) {
  pdl_launch_dependents();
  pdl_wait();
  const int32_t id = tokens[blockIdx.x];
  const bool valid = id >= 0 && id < vocab;
  const size_t src = static_cast<size_t>(valid ? id : 0) * hidden;
  const size_t dst = static_cast<size_t>(blockIdx.x) * hidden;
  if (vectorized) {
    const uint4* from = reinterpret_cast<const uint4*>(table + src);
    uint4* to = reinterpret_cast<uint4*>(out + dst);
    for (int i = threadIdx.x; i < hidden / 8; i += kThreads) {
      to[i] = valid ? from[i] : make_uint4(0, 0, 0, 0);
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += kThreads) {
      out[dst + i] = valid ? table[src + i] : __float2bfloat16(0.0f);
    }
  }
}

}  // namespace

Status rmsnorm(const bf16* x, const bf16* weight, bf16* y, int tokens, int hidden, float eps,
               cudaStream_t stream) {
  if (x == nullptr || weight == nullptr || y == nullptr) {
    return invalid_argument("rmsnorm: x, weight and y must be non-null");
  }
  if (tokens < 1 || hidden < 1) {
    return invalid_argument("rmsnorm: tokens and hidden must be positive, got ", tokens, " and ",
                            hidden);
  }
  return launch(rmsnorm_kernel, dim3(tokens), dim3(kThreads), 0, stream, "rmsnorm", x, weight, y,
                hidden, eps);
}

Status swiglu(const bf16* gate_up, bf16* out, int tokens, int intermediate, cudaStream_t stream) {
  if (gate_up == nullptr || out == nullptr) {
    return invalid_argument("swiglu: gate_up and out must be non-null");
  }
  if (tokens < 1 || intermediate < 1) {
    return invalid_argument("swiglu: tokens and intermediate must be positive");
  }
  const size_t total = static_cast<size_t>(tokens) * intermediate;
  if (overlaps(gate_up, 2 * total * sizeof(bf16), out, total * sizeof(bf16))) {
    return invalid_argument("swiglu: out must not overlap gate_up");
  }
  KVRT_ASSIGN_OR_RETURN(int sms, sm_count());
  const size_t blocks =
      std::min<size_t>((total + kThreads - 1) / kThreads, static_cast<size_t>(sms) * 8);
  return launch(swiglu_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                "swiglu", gate_up, out, tokens, intermediate);
}

Status embedding_gather(const bf16* table, int vocab, int hidden, const int32_t* tokens, int count,
                        bf16* out, cudaStream_t stream) {
  if (table == nullptr || tokens == nullptr || out == nullptr) {
    return invalid_argument("embedding_gather: table, tokens and out must be non-null");
  }
  if (vocab < 1 || hidden < 1 || count < 1) {
    return invalid_argument("embedding_gather: vocab, hidden and count must be positive");
  }
  const bool vectorized = hidden % 8 == 0 && is_aligned(table, 16) && is_aligned(out, 16);
  return launch(embedding_kernel, dim3(count), dim3(kThreads), 0, stream, "embedding_gather", table,
                vocab, hidden, tokens, out, vectorized);
}

}  // namespace kvrt::engine::cuda
