#include "kvrt/engine/cuda/cuda_device_api.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>

#include "kvrt/engine/cuda/kernels.h"

namespace kvrt::engine::cuda {
namespace {

// cuStreamWriteValue32 (CUDA 11.7's ABI), or null where the driver lacks it.
using WriteValue32 = int (*)(void* stream, unsigned long long address, uint32_t value,
                             unsigned flags);
WriteValue32 find_write_value32() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 11070, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<WriteValue32>(fn);
}

class CudaDeviceApi final : public DeviceApi {
 public:
  explicit CudaDeviceApi(int index) : index_(index) {}

  Device device() const override { return Device::cuda(index_); }

  Result<Device> current_device() const override {
    int current = 0;
    KVRT_RETURN_IF_ERROR(cuda_check(cudaGetDevice(&current), "cudaGetDevice"));
    return Device::cuda(current);
  }
  Status set_current_device(Device device) override {
    // The caller's "current device" may be the host (a CPU-only caller): nothing to set.
    if (device.is_cpu()) return Status();
    return cuda_check(cudaSetDevice(device.index), "cudaSetDevice");
  }

  bool is_engine_accessible(const TensorView& view) const override {
    if (!(view.device() == device()) || view.data() == nullptr) return false;
    const MemoryKind kind = memory_kind(view.data(), index_);
    return kind == MemoryKind::kDevice || kind == MemoryKind::kManaged;
  }

  Result<void*> allocate(size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      return allocation_failed("cudaMalloc of ", bytes, " bytes on ", device().to_string(),
                               " failed: ", cudaGetErrorName(error));
    }
    return ptr;
  }
  void free(void* ptr) override {
    if (ptr != nullptr) (void)cudaFree(ptr);
  }
  Result<void*> allocate_host(size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t error = cudaMallocHost(&ptr, bytes == 0 ? 1 : bytes);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      return allocation_failed("cudaMallocHost of ", bytes,
                               " bytes failed: ", cudaGetErrorName(error));
    }
    return ptr;
  }
  void free_host(void* ptr) override {
    if (ptr != nullptr) (void)cudaFreeHost(ptr);
  }
  Status fill_zero(void* ptr, size_t bytes) override {
    if (bytes == 0) return Status();
    KVRT_RETURN_IF_ERROR(cuda_check(cudaMemset(ptr, 0, bytes), "cudaMemset"));
    return cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after cudaMemset");
  }

  Result<StreamHandle> create_stream() override {
    cudaStream_t stream = nullptr;
    KVRT_RETURN_IF_ERROR(cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                    "cudaStreamCreateWithFlags"));
    return static_cast<StreamHandle>(stream);
  }
  void destroy_stream(StreamHandle stream) override {
    if (stream != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }

  Status copy_async(void* dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (bytes == 0 || dst == src) return Status();
    return cuda_check(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync");
  }
  // A stream memory operation (cuStreamWriteValue32, found through the runtime so that
  // nothing links the driver library): the front end writes the value, where a copy from
  // pinned memory takes a copy-engine transfer between two graph launches.
  Status write_i32_async(int32_t* dst, int32_t value, StreamHandle stream) override {
    static const WriteValue32 write = find_write_value32();
    if (write == nullptr) return DeviceApi::write_i32_async(dst, value, stream);
    const int result =
        write(stream, reinterpret_cast<unsigned long long>(dst), static_cast<uint32_t>(value), 0);
    if (result != 0) {
      return internal_error("cuStreamWriteValue32 failed with CUresult ", result);
    }
    return Status();
  }
  // Events for waits keep no timestamp: recording one costs the stream less.
  Result<EventHandle> record_event(StreamHandle stream) override {
    return record(stream, cudaEventDisableTiming);
  }
  Result<EventHandle> record_timing_event(StreamHandle stream) override {
    return record(stream, cudaEventDefault);
  }
  Result<EventHandle> record(StreamHandle stream, unsigned flags) {
    cudaEvent_t event = nullptr;
    KVRT_RETURN_IF_ERROR(
        cuda_check(cudaEventCreateWithFlags(&event, flags), "cudaEventCreateWithFlags"));
    const Status recorded =
        cuda_check(cudaEventRecord(event, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
    if (!recorded.ok()) {
      (void)cudaEventDestroy(event);
      return recorded;
    }
    return static_cast<EventHandle>(event);
  }
  Status wait_event(EventHandle event) override {
    return cuda_check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)),
                      "cudaEventSynchronize");
  }
  Status stream_wait_event(StreamHandle stream, EventHandle event) override {
    return cuda_check(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent");
  }
  void destroy_event(EventHandle event) override {
    if (event != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  Status synchronize(StreamHandle stream) override {
    return cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                      "cudaStreamSynchronize");
  }
  Result<float> elapsed_ms(EventHandle start, EventHandle end) override {
    float ms = 0;
    KVRT_RETURN_IF_ERROR(cuda_check(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
        "cudaEventElapsedTime"));
    return ms;
  }

 private:
  int index_;
};

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
      return "device memory";
    case MemoryKind::kOtherDevice:
      return "another device's memory";
    case MemoryKind::kManaged:
      return "managed memory";
    case MemoryKind::kPinnedHost:
      return "pinned host memory";
    case MemoryKind::kPageableHost:
      return "pageable host memory";
  }
  return "unknown memory";
}

MemoryKind memory_kind(const void* ptr, int device_index) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return MemoryKind::kPageableHost;
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
      return attributes.device == device_index ? MemoryKind::kDevice : MemoryKind::kOtherDevice;
    case cudaMemoryTypeManaged:
      return MemoryKind::kManaged;
    case cudaMemoryTypeHost:
      return MemoryKind::kPinnedHost;
    default:
      return MemoryKind::kPageableHost;
  }
}

Result<DeviceApi*> cuda_device_api(int index) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudaDeviceApi>> apis;
  std::lock_guard lock(mutex);
  auto found = apis.find(index);
  if (found != apis.end()) return static_cast<DeviceApi*>(found->second.get());
  std::string why;
  if (!cuda_device_available(&why)) return not_found(why);
  int count = 0;
  KVRT_RETURN_IF_ERROR(cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (index < 0 || index >= count) {
    return not_found("no CUDA device cuda:", index, " (", count, " present)");
  }
  cudaDeviceProp prop{};
  KVRT_RETURN_IF_ERROR(
      cuda_check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties"));
  if (prop.major != 9 || prop.minor != 0) {
    return not_found("cuda:", index, " (", prop.name, ") has compute capability ", prop.major, ".",
                     prop.minor, "; the kernels are built for sm_90a");
  }
  auto api = std::make_unique<CudaDeviceApi>(index);
  DeviceApi* raw = api.get();
  apis.emplace(index, std::move(api));
  return raw;
}

std::string cuda_device_description(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return std::string(prop.name) + " (cuda:" + std::to_string(index) + ", " +
         std::to_string(prop.multiProcessorCount) + " SMs, " +
         std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

}  // namespace kvrt::engine::cuda
