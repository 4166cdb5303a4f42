// Device queries and launch settings shared by every kernel of the library.
#include <map>
#include <mutex>
#include <tuple>

#include "kvrt/engine/cuda/kernels.h"
#include "kvrt/engine/cuda/launch.h"

namespace kvrt::engine::cuda {
namespace {

// Per thread: the benchmark and the tests that turn it off cannot change how an engine on
// another thread launches (nor what a graph captured there holds).
thread_local bool t_programmatic_launch = true;

Result<int> current_device() {
  int device = 0;
  KVRT_RETURN_IF_ERROR(cuda_check(cudaGetDevice(&device), "cudaGetDevice"));
  return device;
}

}  // namespace

bool cuda_device_available(std::string* why) {
  auto say = [why](std::string text) {
    if (why != nullptr) *why = std::move(text);
    return false;
  };
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: callers go on without a device
    // Without a GPU the runtime reports a driver "too old" for it: say what it means.
    const char* meaning = error == cudaErrorInsufficientDriver ? "no usable NVIDIA driver, "
                          : error == cudaErrorNoDevice         ? "no device, "
                                                               : "";
    return say(std::string("no CUDA device: ") + meaning + cudaGetErrorName(error) + " (" +
               cudaGetErrorString(error) + ")");
  }
  if (count == 0) return say("no CUDA device: the driver reports none");
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return say("no CUDA device: cannot read the current device's properties");
  }
  // sm_90a code runs on compute capability 9.0 exactly.
  if (prop.major != 9 || prop.minor != 0) {
    return say("no CUDA device that runs sm_90a code: device " + std::to_string(device) + " (" +
               prop.name + ") has compute capability " + std::to_string(prop.major) + "." +
               std::to_string(prop.minor));
  }
  if (why != nullptr) why->clear();
  return true;
}

Status cuda_check(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return Status();
  return internal_error(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

Result<int> sm_count() {
  static std::mutex mutex;
  static std::map<int, int> cache;
  KVRT_ASSIGN_OR_RETURN(int device, current_device());
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  int count = 0;
  KVRT_RETURN_IF_ERROR(cuda_check(
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), "sm_count"));
  cache[device] = count;
  return count;
}

void set_programmatic_launch(bool enabled) {
  t_programmatic_launch = enabled;
}
bool programmatic_launch() {
  return t_programmatic_launch;
}

namespace detail {

Status allow_shared_memory(const void* kernel, size_t bytes, std::string_view name) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int>, size_t> granted;
  if (bytes <= 48 * 1024) return Status();
  KVRT_ASSIGN_OR_RETURN(int device, current_device());
  std::lock_guard<std::mutex> lock(mutex);
  size_t& have = granted[{kernel, device}];
  if (have >= bytes) return Status();
  int limit = 0;
  KVRT_RETURN_IF_ERROR(cuda_check(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), name));
  if (bytes > static_cast<size_t>(limit)) {
    return not_supported(name, ": needs ", bytes, " bytes of shared memory per block, device ",
                         device, " offers ", limit);
  }
  KVRT_RETURN_IF_ERROR(
      cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(bytes)),
                 name));
  have = bytes;
  return Status();
}

Result<int> resident_blocks(const void* kernel, int threads, size_t smem) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, size_t, int>, int> cache;
  KVRT_ASSIGN_OR_RETURN(int device, current_device());
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(kernel, threads, smem, device);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int blocks = 0;
  KVRT_RETURN_IF_ERROR(
      cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem),
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
  blocks = blocks < 1 ? 1 : blocks;
  cache[key] = blocks;
  return blocks;
}

}  // namespace detail
}  // namespace kvrt::engine::cuda
