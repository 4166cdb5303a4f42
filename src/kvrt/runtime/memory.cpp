#include "kvrt/runtime/memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kvrt::runtime {
namespace {
constexpr size_t kMaxAllocationBytes = SIZE_MAX / 2;
}  // namespace

Result<Allocation> Allocation::create(size_t bytes, engine::DeviceApi* api) {
  Allocation allocation;
  allocation.size_ = bytes;
  allocation.api_ = api;
  if (bytes == 0) return allocation;
  // Beyond half the address space no allocator can succeed (and a sanitizer's aborts
  // instead of failing); below it, rounding up to 64 cannot wrap.
  if (bytes > kMaxAllocationBytes) return allocation_failed("allocation of ", bytes, " bytes");
  if (api != nullptr) {
    KVRT_ASSIGN_OR_RETURN(void* ptr, api->allocate(bytes));
    allocation.data_ = static_cast<std::byte*>(ptr);
  } else {
    // 64-byte aligned, like planned offsets (kPlanAlignment).
    const size_t rounded = (bytes + 63) / 64 * 64;
    allocation.data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (allocation.data_ == nullptr)
      return allocation_failed("host allocation of ", bytes, " bytes");
  }
  KVRT_RETURN_IF_ERROR(allocation.zero());
  return allocation;
}

Result<Allocation> Allocation::create_host(size_t bytes, engine::DeviceApi& api) {
  Allocation allocation;
  allocation.size_ = bytes;
  if (bytes == 0) return allocation;
  if (bytes > kMaxAllocationBytes) return allocation_failed("allocation of ", bytes, " bytes");
  KVRT_ASSIGN_OR_RETURN(void* ptr, api.allocate_host(bytes));
  allocation.data_ = static_cast<std::byte*>(ptr);
  allocation.api_ = &api;
  allocation.host_ = true;
  KVRT_RETURN_IF_ERROR(allocation.zero());
  return allocation;
}

Allocation::Allocation(Allocation&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      api_(std::exchange(other.api_, nullptr)),
      host_(std::exchange(other.host_, false)) {}

Allocation& Allocation::operator=(Allocation&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    api_ = std::exchange(other.api_, nullptr);
    host_ = std::exchange(other.host_, false);
  }
  return *this;
}

Allocation::~Allocation() {
  release();
}

void Allocation::release() {
  if (data_ == nullptr) return;
  if (api_ != nullptr && host_) {
    api_->free_host(data_);
  } else if (api_ != nullptr) {
    api_->free(data_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

Status Allocation::zero() {
  if (data_ == nullptr) return Status();
  if (api_ != nullptr && !host_) return api_->fill_zero(data_, size_);
  std::memset(data_, 0, size_);
  return Status();
}

Result<std::unique_ptr<BufferSet>> BufferSet::create(const format::ProgramSpec& spec,
                                                     engine::DeviceApi& api, Device device) {
  auto set = std::make_unique<BufferSet>();
  for (const format::BufferSpec& spec_buffer : spec.buffers) {
    Buffer buffer;
    buffer.name = spec_buffer.name;
    buffer.dtype = spec_buffer.dtype;
    KVRT_ASSIGN_OR_RETURN(buffer.shape, Shape::from_span(spec_buffer.shape));
    buffer.arena = spec_buffer.arena;
    const bool on_device = spec_buffer.arena == format::Arena::kDevice;
    buffer.device = on_device ? device : Device::cpu();
    KVRT_ASSIGN_OR_RETURN(int64_t numel, buffer.shape.numel());
    // Checked: a shape from a file must not wrap into a small allocation.
    const size_t width = dtype_size(buffer.dtype);
    if (numel < 0 || static_cast<uint64_t>(numel) > kMaxAllocationBytes / width) {
      return allocation_failed("buffer '", buffer.name, "': ", numel, " elements of ", width,
                               " bytes exceed the address space");
    }
    const size_t bytes = static_cast<size_t>(numel) * width;
    Result<Allocation> storage = Allocation::create(bytes, on_device ? &api : nullptr);
    if (!storage.ok()) return storage.status().with_context("buffer '" + buffer.name + "'");
    buffer.storage = std::move(storage).value();
    set->buffers_.push_back(std::move(buffer));
  }
  return set;
}

const BufferSet::Buffer* BufferSet::find(std::string_view name) const {
  for (const Buffer& buffer : buffers_) {
    if (buffer.name == name) return &buffer;
  }
  return nullptr;
}

Status BufferSet::reset() {
  for (Buffer& buffer : buffers_) {
    Status status = buffer.storage.zero();
    if (!status.ok()) return status.with_context("buffer '" + buffer.name + "'");
  }
  return Status();
}

}  // namespace kvrt::runtime
