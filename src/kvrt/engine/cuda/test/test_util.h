// Shared helpers for the CUDA kernel tests: skipping without a device, RAII device
// buffers, random bf16 data, and tolerance checks with the failing elements named.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/engine/cuda/kernels.h"

// Skips the test (GTEST_SKIP, "no CUDA device: ...") unless a device that runs the
// library's sm_90a code is present. CI builds and runs the tests without one.
#define KVRT_REQUIRE_CUDA_DEVICE()                                  \
  do {                                                              \
    std::string kvrt_why_;                                          \
    if (!::kvrt::engine::cuda::cuda_device_available(&kvrt_why_)) { \
      GTEST_SKIP() << kvrt_why_;                                    \
    }                                                               \
  } while (0)

#define KVRT_ASSERT_OK(expr)                                    \
  do {                                                          \
    const ::kvrt::Status kvrt_status_ = (expr);                 \
    ASSERT_TRUE(kvrt_status_.ok()) << kvrt_status_.to_string(); \
  } while (0)

namespace kvrt::engine::cuda::testing {

// Throws (failing the test with the message) when a CUDA call fails.
void check_cuda(cudaError_t error, const char* what);

// Waits for the device and fails loudly on any asynchronous error.
void sync_device();

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    check_cuda(cudaMalloc(&ptr_, bytes() == 0 ? 1 : bytes()), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return static_cast<T*>(ptr_); }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }
  // The storage as bf16 (for buffers of raw bf16 bits, T = uint16_t).
  bf16* as_bf16() const { return static_cast<bf16*>(ptr_); }

  void upload(const std::vector<T>& host) {
    if (host.size() != count_) throw std::runtime_error("upload: size mismatch");
    check_cuda(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    check_cuda(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost), "download");
    return host;
  }
  // Every byte 0xFF: NaN as bf16 or f32, -1 as int32. Catches elements never written.
  void poison() { check_cuda(cudaMemset(ptr_, 0xFF, bytes()), "poison"); }
  // The first `count` bytes zero (all of them by default).
  void zero(size_t count = SIZE_MAX) {
    check_cuda(cudaMemset(ptr_, 0, count < bytes() ? count : bytes()), "zero");
  }

 private:
  void* ptr_ = nullptr;
  size_t count_ = 0;
};

// Uniform in [lo, hi), rounded to bf16 (raw bits).
std::vector<uint16_t> random_bf16(size_t count, float lo, float hi, std::mt19937& rng);
std::vector<float> to_float(const std::vector<uint16_t>& bits);
std::vector<uint16_t> to_bf16(const std::vector<float>& values);

struct Tolerance {
  double atol = 0.0;    // absolute, per element
  double rtol = 0.0;    // relative to |reference|, per element
  double rel_l2 = 0.0;  // ||out - ref|| / ||ref|| over the whole tensor
};

// Every element within atol + rtol * |ref| (NaN never passes), and the relative L2
// error within rel_l2. The message names the worst elements.
::testing::AssertionResult all_close(const std::vector<float>& out, const std::vector<float>& ref,
                                     const Tolerance& tolerance);

// Joins streamable parts into a test-parameter name (GCC 12 warns, falsely, on
// "literal" + std::string chains at -O3).
template <typename... Parts>
std::string param_name(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Root mean square of a tensor (used to scale absolute tolerances).
double rms(const std::vector<float>& values);

}  // namespace kvrt::engine::cuda::testing
