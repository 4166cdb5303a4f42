// Runtime memory: arenas (one allocation per method and arena kind, carved by the
// memory plan) and the program's mutable buffers, shared by name across methods.
// Device memory comes from the engine target's DeviceApi; host memory from the heap.
// Both are zeroed at allocation (F4).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/engine/common/device_api.h"
#include "kvrt/format/program.h"

namespace kvrt::runtime {

// One zeroed allocation, on the device (through `api`) or on the host (api null).
class Allocation {
 public:
  static Result<Allocation> create(size_t bytes, engine::DeviceApi* api);
  // Zeroed host memory from `api` (pinned on CUDA: the device copies to and from it
  // asynchronously and at full speed).
  static Result<Allocation> create_host(size_t bytes, engine::DeviceApi& api);
  Allocation() = default;
  Allocation(Allocation&& other) noexcept;
  Allocation& operator=(Allocation&& other) noexcept;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  Status zero();

 private:
  void release();
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  engine::DeviceApi* api_ = nullptr;
  bool host_ = false;  // api_'s host memory (allocate_host)
};

// The mutable buffers (KV caches) of one loaded program. Every method of the program
// binds the same storage, so what prefill writes decode reads.
class BufferSet {
 public:
  struct Buffer {
    std::string name;
    DType dtype = DType::kF32;
    Shape shape;
    format::Arena arena = format::Arena::kDevice;
    Device device;  // where the storage is: the engine's device or the host
    Allocation storage;
    TensorView view() const { return TensorView(storage.data(), dtype, shape, device); }
  };

  // Allocates every buffer of `spec`, zeroed: device-arena buffers on `device` through
  // `api`, host-arena buffers on the host.
  static Result<std::unique_ptr<BufferSet>> create(const format::ProgramSpec& spec,
                                                   engine::DeviceApi& api, Device device);

  const Buffer* find(std::string_view name) const;
  std::span<const Buffer> buffers() const { return buffers_; }
  // Zeroes every buffer (a fresh sequence).
  Status reset();

 private:
  std::vector<Buffer> buffers_;
};

}  // namespace kvrt::runtime
