// Device-side part of the benchmark's shared pieces: random buffer contents.
#include "bench_common.h"

namespace kvrt::engine::cuda::bench {
namespace {

// Uniform values in [-scale, scale) as bf16, from a hash of the index: never zeros.
__global__ void fill_bf16(uint16_t* out, size_t count, float scale, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b9u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    const float u = (static_cast<float>(h >> 8) / 16777216.0f) * 2.0f - 1.0f;
    out[i] = __bfloat16_as_ushort(__float2bfloat16(u * scale));
  }
}

}  // namespace

void Buffer::random(float scale, uint32_t seed) {
  fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(ptr), bytes / 2, scale, seed);
  check(cudaGetLastError(), "fill");
  check(cudaDeviceSynchronize(), "fill");  // the timed stream does not wait on this one
}

// `copies` buffers of `bytes` each, random bf16.
std::vector<std::unique_ptr<Buffer>> rotation(size_t bytes, int copies, float scale) {
  std::vector<std::unique_ptr<Buffer>> out;
  for (int i = 0; i < copies; ++i) {
    out.push_back(std::make_unique<Buffer>(bytes));
    out.back()->random(scale, 1234u + static_cast<uint32_t>(i));
  }
  return out;
}

}  // namespace kvrt::engine::cuda::bench
