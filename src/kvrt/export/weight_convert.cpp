#include "kvrt/export/weight_convert.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

namespace kvrt::exporter {
namespace {

constexpr size_t kParallelBytes = size_t{8} << 20;  // below this, one thread

float load(const std::byte* src, DType dtype, size_t i) {
  switch (dtype) {
    case DType::kF32: {
      float value;
      std::memcpy(&value, src + 4 * i, 4);
      return value;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      return dtype == DType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits);
    }
    default:
      return 0.0f;
  }
}

void store(std::byte* dst, DType dtype, size_t i, float value) {
  if (dtype == DType::kF32) {
    std::memcpy(dst + 4 * i, &value, 4);
    return;
  }
  const uint16_t bits = dtype == DType::kF16 ? f32_to_f16(value) : f32_to_bf16(value);
  std::memcpy(dst + 2 * i, &bits, 2);
}

void convert_range(const std::byte* src, DType from, std::byte* dst, DType to, size_t begin,
                   size_t end) {
  if (from == to) {
    const size_t width = dtype_size(from);
    std::memcpy(dst + begin * width, src + begin * width, (end - begin) * width);
    return;
  }
  for (size_t i = begin; i < end; ++i) store(dst, to, i, load(src, from, i));
}

}  // namespace

Status convert_weight(std::span<const std::byte> src, DType from, std::span<std::byte> dst,
                      DType to) {
  if (!is_floating(from) || !is_floating(to)) {
    if (from != to) {
      return invalid_argument("cannot convert ", dtype_name(from), " to ", dtype_name(to));
    }
  }
  const size_t count = src.size() / dtype_size(from);
  if (src.size() % dtype_size(from) != 0 || dst.size() != count * dtype_size(to)) {
    return invalid_argument("weight conversion: ", src.size(), " bytes of ", dtype_name(from),
                            " do not fill ", dst.size(), " bytes of ", dtype_name(to));
  }
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  if (dst.size() < kParallelBytes || threads == 1) {
    convert_range(src.data(), from, dst.data(), to, 0, count);
    return Status();
  }
  std::vector<std::thread> workers;
  const size_t chunk = (count + threads - 1) / threads;
  for (size_t t = 0; t < threads; ++t) {
    const size_t begin = std::min(count, t * chunk), end = std::min(count, begin + chunk);
    if (begin == end) break;
    try {
      workers.emplace_back(convert_range, src.data(), from, dst.data(), to, begin, end);
    } catch (const std::exception&) {  // no thread available: do this chunk here
      convert_range(src.data(), from, dst.data(), to, begin, end);
    }
  }
  for (std::thread& worker : workers) worker.join();
  return Status();
}

}  // namespace kvrt::exporter
