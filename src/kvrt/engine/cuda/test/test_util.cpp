#include "kvrt/engine/cuda/test/test_util.h"

#include <cmath>
#include <sstream>

namespace kvrt::engine::cuda::testing {

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(error) + " (" +
                             cudaGetErrorString(error) + ")");
  }
}

void sync_device() {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check_cuda(cudaGetLastError(), "cudaGetLastError");
}

std::vector<uint16_t> random_bf16(size_t count, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> out(count);
  for (auto& v : out) v = f32_to_bf16(dist(rng));
  return out;
}

std::vector<float> to_float(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_f32(bits[i]);
  return out;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = f32_to_bf16(values[i]);
  return out;
}

double rms(const std::vector<float>& values) {
  double sum = 0.0;
  for (float v : values) sum += static_cast<double>(v) * v;
  return values.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(values.size()));
}

::testing::AssertionResult all_close(const std::vector<float>& out, const std::vector<float>& ref,
                                     const Tolerance& tolerance) {
  if (out.size() != ref.size()) {
    return ::testing::AssertionFailure()
           << "size " << out.size() << " != reference size " << ref.size();
  }
  size_t bad = 0;
  std::ostringstream first;
  double diff2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = out[i], r = ref[i], d = std::fabs(o - r);
    diff2 += d * d;
    ref2 += r * r;
    if (!(d <= tolerance.atol + tolerance.rtol * std::fabs(r))) {  // NaN fails here
      if (bad < 8) first << "\n  [" << i << "] got " << o << ", want " << r;
      ++bad;
    }
  }
  const double rel_l2 = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (bad > 0 || !(rel_l2 <= tolerance.rel_l2)) {
    return ::testing::AssertionFailure()
           << bad << " of " << out.size() << " elements outside atol " << tolerance.atol
           << " + rtol " << tolerance.rtol << "; relative L2 error " << rel_l2 << " (limit "
           << tolerance.rel_l2 << ")" << first.str();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvrt::engine::cuda::testing
