#include "kvrt/engine/common/device_api.h"

#include <cstdlib>
#include <cstring>

namespace kvrt::engine {
namespace {

class HostDeviceApi final : public DeviceApi {
 public:
  Device device() const override { return Device::cpu(); }
  Result<Device> current_device() const override { return Device::cpu(); }
  Status set_current_device(Device device) override {
    if (!device.is_cpu()) return invalid_argument("host target cannot select ", device.to_string());
    return Status();
  }
  bool is_engine_accessible(const TensorView& view) const override {
    return view.device().is_cpu();
  }
  Result<void*> allocate(size_t bytes) override {
    void* ptr = std::malloc(bytes == 0 ? 1 : bytes);
    if (ptr == nullptr) return allocation_failed("host allocation of ", bytes, " bytes failed");
    return ptr;
  }
  void free(void* ptr) override { std::free(ptr); }
  Status fill_zero(void* ptr, size_t bytes) override {
    if (bytes != 0) std::memset(ptr, 0, bytes);
    return Status();
  }
  Result<StreamHandle> create_stream() override { return StreamHandle{nullptr}; }
  void destroy_stream(StreamHandle) override {}
  Status copy_async(void* dst, const void* src, size_t bytes, StreamHandle) override {
    if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
    return Status();
  }
  Status write_i32_async(int32_t* dst, int32_t value, StreamHandle) override {
    *dst = value;
    return Status();
  }
  Result<EventHandle> record_event(StreamHandle) override { return EventHandle{nullptr}; }
  Status wait_event(EventHandle) override { return Status(); }
  void destroy_event(EventHandle) override {}
  Status synchronize(StreamHandle) override { return Status(); }
};

}  // namespace

Result<void*> DeviceApi::allocate_host(size_t bytes) {
  void* ptr = std::malloc(bytes == 0 ? 1 : bytes);
  if (ptr == nullptr) return allocation_failed("host allocation of ", bytes, " bytes failed");
  return ptr;
}

void DeviceApi::free_host(void* ptr) {
  std::free(ptr);
}

Status DeviceApi::write_i32_async(int32_t*, int32_t, StreamHandle) {
  return not_supported(device().to_string(), " has no stream-ordered value writes");
}

Result<EventHandle> DeviceApi::record_timing_event(StreamHandle stream) {
  return record_event(stream);
}

Status DeviceApi::stream_wait_event(StreamHandle, EventHandle event) {
  return wait_event(event);
}

Result<float> DeviceApi::elapsed_ms(EventHandle, EventHandle) {
  return not_supported(device().to_string(), " keeps no event timestamps");
}

DeviceApi& host_device_api() {
  static HostDeviceApi api;
  return api;
}

CurrentDeviceGuard::CurrentDeviceGuard(DeviceApi& api) : api_(api) {
  Result<Device> current = api_.current_device();
  if (current.ok()) {
    saved_ = *current;
  } else {
    status_ = current.status();
  }
}

CurrentDeviceGuard::~CurrentDeviceGuard() {
  if (status_.ok()) (void)api_.set_current_device(saved_);
}

}  // namespace kvrt::engine
