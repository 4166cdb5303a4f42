// Greedy sampling: argmax over f32 logits [rows, vocab] in two stages. Stage 1: each
// block reduces a 512-logit slice of a row to (value, index) in the workspace; stage 2:
// one block per row reduces the slices and writes the token id to device memory, where
// the next step's embedding_gather reads it. Ties go to the lowest index; NaN is the
// largest value (torch.argmax).
#include <climits>

#include "kvrt/engine/cuda/device_common.cuh"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;
constexpr int kSlice = 512;  // logits per stage-1 block: enough blocks to read them at once

struct Best {
  float value;
  int index;
};

__device__ __forceinline__ bool better(float value, int index, const Best& best) {
  const bool nan = value != value, best_nan = best.value != best.value;
  if (nan || best_nan) return nan && (!best_nan || index < best.index);
  return value > best.value || (value == best.value && index < best.index);
}

// Reduces across the block; thread 0 gets the result. `values`/`indices` hold 8 entries.
__device__ Best block_best(Best best, float* values, int* indices) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best.value, offset);
    const int i = __shfl_xor_sync(0xffffffffu, best.index, offset);
    if (better(v, i, best)) best = {v, i};
  }
  if ((threadIdx.x & 31) == 0) {
    values[threadIdx.x >> 5] = best.value;
    indices[threadIdx.x >> 5] = best.index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (better(values[w], indices[w], best)) best = {values[w], indices[w]};
    }
  }
  return best;
}

__global__ void __launch_bounds__(kThreads)
    argmax_slices(const float* logits, int vocab, int slices, float* slice_values,
                  int* slice_indices) {
  __shared__ float values[kThreads / 32];
  __shared__ int indices[kThreads / 32];
  pdl_launch_dependents();
  pdl_wait();
  const float* row = logits + static_cast<size_t>(blockIdx.y) * vocab;
  const int begin = blockIdx.x * kSlice;
  const int end = min(begin + kSlice, vocab);
  Best best = {-INFINITY, INT_MAX};
#pragma unroll 8
  for (int i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = row[i];
    if (better(v, i, best)) best = {v, i};
  }
  best = block_best(best, values, indices);
  if (threadIdx.x == 0) {
    slice_values[blockIdx.y * slices + blockIdx.x] = best.value;
    slice_indices[blockIdx.y * slices + blockIdx.x] = best.index;
  }
}

__global__ void __launch_bounds__(kThreads)
    argmax_rows(const float* slice_values, const int* slice_indices, int slices, int32_t* out) {
  __shared__ float values[kThreads / 32];
  __shared__ int indices[kThreads / 32];
  pdl_launch_dependents();
  pdl_wait();
  Best best = {-INFINITY, INT_MAX};
  for (int s = threadIdx.x; s < slices; s += kThreads) {
    const int at = blockIdx.x * slices + s;
    if (better(slice_values[at], slice_indices[at], best)) {
      best = {slice_values[at], slice_indices[at]};
    }
  }
  best = block_best(best, values, indices);
  if (threadIdx.x == 0) out[blockIdx.x] = best.index;
}

int slices_for(int vocab) {
  return ceil_div(vocab, kSlice);
}

}  // namespace

size_t argmax_workspace_bytes(int rows, int vocab) {
  if (rows < 1 || vocab < 1) return 0;
  return static_cast<size_t>(rows) * slices_for(vocab) * (sizeof(float) + sizeof(int));
}

Status argmax(const float* logits, int rows, int vocab, void* workspace, size_t workspace_bytes,
              int32_t* out, cudaStream_t stream) {
  if (logits == nullptr || workspace == nullptr || out == nullptr) {
    return invalid_argument("argmax: logits, workspace and out must be non-null");
  }
  if (rows < 1 || vocab < 1) {
    return invalid_argument("argmax: rows and vocab must be positive, got ", rows, " and ", vocab);
  }
  if (!is_aligned(workspace, alignof(float))) {
    return invalid_argument("argmax: workspace must be 4-byte aligned (it holds floats)");
  }
  if (workspace_bytes < argmax_workspace_bytes(rows, vocab)) {
    return invalid_argument(
        "argmax: workspace_bytes ", workspace_bytes,
        " is below argmax_workspace_bytes() = ", argmax_workspace_bytes(rows, vocab));
  }
  const int slices = slices_for(vocab);
  float* values = static_cast<float*>(workspace);
  int* indices = reinterpret_cast<int*>(values + static_cast<size_t>(rows) * slices);
  KVRT_RETURN_IF_ERROR(launch(argmax_slices, dim3(slices, rows), dim3(kThreads), 0, stream,
                              "argmax", logits, vocab, slices, values, indices));
  return launch(argmax_rows, dim3(rows), dim3(kThreads), 0, stream, "argmax",
                static_cast<const float*>(values), static_cast<const int*>(indices), slices, out);
}

}  // namespace kvrt::engine::cuda
