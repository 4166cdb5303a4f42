// TensorView: a non-owning view of typed memory on some device. It is what crosses
// the delegate boundary, so it carries everything execute() must check (D1, D2).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"

namespace kvrt {

enum class DeviceType : uint8_t { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device cpu() { return {DeviceType::kCpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::kCuda, index}; }
  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  bool operator==(const Device&) const = default;
  // "cpu" or "cuda:N".
  std::string to_string() const;
};

// Parses "cpu", "cuda" (index 0) or "cuda:N".
Result<Device> parse_device(std::string_view text);

// Fixed-capacity shape: the hot path never allocates for shapes.
class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Result<Shape> from_span(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  // Element count; error on negative dims or int64 overflow.
  Result<int64_t> numel() const;
  bool operator==(const Shape& other) const;
  // "[1, 8, 64]"
  std::string to_string() const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class TensorView {
 public:
  TensorView() = default;
  // A contiguous (row-major) view.
  TensorView(void* data, DType dtype, Shape shape, Device device = Device::cpu());
  // A strided view; strides are in elements.
  TensorView(void* data, DType dtype, Shape shape, Shape strides, Device device);

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  Device device() const { return device_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }

  Result<int64_t> numel() const { return shape_.numel(); }
  // Bytes spanned by the elements; error on overflow.
  Result<int64_t> nbytes() const;
  bool is_contiguous() const;
  bool empty() const;

  // Same storage, new contiguous shape with the same element count.
  Result<TensorView> reshaped(Shape shape) const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Shape shape_;
  Shape strides_;
  Device device_;
};

Shape contiguous_strides(const Shape& shape);

// a * b into *out; false on overflow or negative operands.
bool checked_mul(int64_t a, int64_t b, int64_t* out);
bool checked_add(int64_t a, int64_t b, int64_t* out);

}  // namespace kvrt
