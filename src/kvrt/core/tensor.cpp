#include "kvrt/core/tensor.h"

#include <charconv>

namespace kvrt {

std::string Device::to_string() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index);
}

Result<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  constexpr std::string_view kPrefix = "cuda:";
  if (text.starts_with(kPrefix)) {
    std::string_view digits = text.substr(kPrefix.size());
    int index = -1;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (error == std::errc() && end == digits.data() + digits.size() && index >= 0) {
      return Device::cuda(index);
    }
  }
  return invalid_argument("unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

bool checked_add(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_add_overflow(a, b, out);
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) {
    if (rank_ == kMaxRank) break;  // from_span reports this case; literals never hit it
    dims_[static_cast<size_t>(rank_++)] = d;
  }
}

Result<Shape> Shape::from_span(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return invalid_argument("rank ", dims.size(), " exceeds the maximum of ", kMaxRank);
  }
  Shape shape;
  for (int64_t d : dims) shape.dims_[static_cast<size_t>(shape.rank_++)] = d;
  return shape;
}

Result<int64_t> Shape::numel() const {
  int64_t count = 1;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[static_cast<size_t>(i)] < 0) {
      return invalid_argument("negative dimension ", dims_[static_cast<size_t>(i)], " in shape ",
                              to_string());
    }
    if (!checked_mul(count, dims_[static_cast<size_t>(i)], &count)) {
      return invalid_argument("element count of shape ", to_string(), " overflows");
    }
  }
  return count;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if ((*this)[i] != other[i]) return false;
  }
  return true;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ", ";
    out += std::to_string((*this)[i]);
  }
  return out + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides = shape;
  int64_t stride = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[i] = stride;
    // Overflow here is caught by numel()/nbytes() checks before anyone uses the view.
    stride = static_cast<int64_t>(static_cast<uint64_t>(stride) *
                                  static_cast<uint64_t>(shape[i] > 0 ? shape[i] : 1));
  }
  return strides;
}

TensorView::TensorView(void* data, DType dtype, Shape shape, Device device)
    : data_(data),
      dtype_(dtype),
      shape_(shape),
      strides_(contiguous_strides(shape)),
      device_(device) {}

TensorView::TensorView(void* data, DType dtype, Shape shape, Shape strides, Device device)
    : data_(data), dtype_(dtype), shape_(shape), strides_(strides), device_(device) {}

Result<int64_t> TensorView::nbytes() const {
  if (strides_.rank() != shape_.rank()) {
    return invalid_argument("strides rank ", strides_.rank(), " != shape rank ", shape_.rank());
  }
  KVRT_ASSIGN_OR_RETURN(int64_t count, shape_.numel());
  if (count == 0) return int64_t{0};
  // Span of a strided view: 1 + sum((dim - 1) * stride), in elements.
  int64_t span = 1;
  for (int i = 0; i < shape_.rank(); ++i) {
    int64_t extent;
    if (strides_[i] < 0 || !checked_mul(shape_[i] - 1, strides_[i], &extent) ||
        !checked_add(span, extent, &span)) {
      return invalid_argument("byte size of shape ", shape_.to_string(), " overflows");
    }
  }
  int64_t bytes;
  if (!checked_mul(span, static_cast<int64_t>(dtype_size(dtype_)), &bytes)) {
    return invalid_argument("byte size of shape ", shape_.to_string(), " overflows");
  }
  return bytes;
}

bool TensorView::is_contiguous() const {
  if (strides_.rank() != shape_.rank()) return false;
  int64_t expected = 1;
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    if (!checked_mul(expected, shape_[i], &expected)) return false;
  }
  return true;
}

bool TensorView::empty() const {
  auto count = shape_.numel();
  return !count.ok() || *count == 0;
}

Result<TensorView> TensorView::reshaped(Shape shape) const {
  if (!is_contiguous()) return invalid_argument("cannot reshape a non-contiguous view");
  KVRT_ASSIGN_OR_RETURN(int64_t old_count, shape_.numel());
  KVRT_ASSIGN_OR_RETURN(int64_t new_count, shape.numel());
  if (old_count != new_count) {
    return invalid_argument("cannot reshape ", shape_.to_string(), " to ", shape.to_string());
  }
  return TensorView(data_, dtype_, shape, device_);
}

}  // namespace kvrt
