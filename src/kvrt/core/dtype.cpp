#include "kvrt/core/dtype.h"

#include <cmath>

namespace kvrt {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI64:
      return 8;
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
    case DType::kBool:
      return "bool";
  }
  return "invalid";
}

Result<DType> parse_dtype(std::string_view name) {
  struct Spelling {
    std::string_view name;
    DType dtype;
  };
  static constexpr Spelling kSpellings[] = {
      {"f32", DType::kF32},   {"F32", DType::kF32},   {"float32", DType::kF32},
      {"f16", DType::kF16},   {"F16", DType::kF16},   {"float16", DType::kF16},
      {"bf16", DType::kBF16}, {"BF16", DType::kBF16}, {"bfloat16", DType::kBF16},
      {"i32", DType::kI32},   {"I32", DType::kI32},   {"int32", DType::kI32},
      {"i64", DType::kI64},   {"I64", DType::kI64},   {"int64", DType::kI64},
      {"u8", DType::kU8},     {"U8", DType::kU8},     {"uint8", DType::kU8},
      {"bool", DType::kBool}, {"BOOL", DType::kBool},
  };
  for (const auto& spelling : kSpellings) {
    if (spelling.name == name) return spelling.dtype;
  }
  return invalid_argument("unknown dtype '", name, "'");
}

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = (bits >> 15) & 1u;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

uint16_t f32_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
  if (abs_bits < 0x38800000u) {
    // Subnormal or zero in f16: scale so that rounding happens at the f16 ulp (2^-24).
    float abs_value;
    std::memcpy(&abs_value, &abs_bits, sizeof(abs_value));
    const float scaled = std::nearbyint(abs_value * 16777216.0f);  // ties to even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(scaled));
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  uint32_t rebased = abs_bits - 0x38000000u;
  uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rebased + rounding) >> 13));
}

}  // namespace kvrt
