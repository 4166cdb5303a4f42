// Element types and the half-precision conversions every engine shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kvrt/core/result.h"

namespace kvrt {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kU8, kBool };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                                       DType::kI64, DType::kU8,  DType::kBool};

size_t dtype_size(DType dtype);
// Canonical lowercase names: "f32", "f16", "bf16", "i32", "i64", "u8", "bool".
std::string_view dtype_name(DType dtype);
// Accepts canonical names and the safetensors spellings ("F32", "BF16", "BOOL", ...).
Result<DType> parse_dtype(std::string_view name);
bool is_floating(DType dtype);

// bf16 is the top half of an f32; rounding is to nearest even, NaN stays NaN.
inline float bf16_to_f32(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

inline uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

}  // namespace kvrt
