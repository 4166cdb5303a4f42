#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kvrt/core/dtype.h"

namespace kvrt {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI32), 4u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_size(DType::kU8), 1u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  for (DType dtype : kAllDTypes) {
    auto parsed = parse_dtype(dtype_name(dtype));
    ASSERT_TRUE(parsed.ok()) << dtype_name(dtype);
    EXPECT_EQ(*parsed, dtype);
  }
}

TEST(DType, SafetensorsSpellingsParse) {
  EXPECT_EQ(*parse_dtype("BF16"), DType::kBF16);
  EXPECT_EQ(*parse_dtype("F16"), DType::kF16);
  EXPECT_EQ(*parse_dtype("I64"), DType::kI64);
  EXPECT_EQ(*parse_dtype("BOOL"), DType::kBool);
}

TEST(DType, UnknownNameIsAnErrorNamingIt) {
  auto parsed = parse_dtype("F8_E4M3");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("F8_E4M3"), std::string::npos);
}

TEST(DType, InvalidEnumValueHasNoSize) {
  EXPECT_EQ(dtype_size(static_cast<DType>(200)), 0u);
  EXPECT_EQ(dtype_name(static_cast<DType>(200)), "invalid");
}

// Hand-derived bit patterns: 1.0 = 0x3f80 (bf16) / 0x3c00 (f16), -2.0 = 0xc000 / 0xc000.
TEST(DType, Bf16KnownValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0.
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(INFINITY)), INFINITY);
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);       // largest finite
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);       // rounds to infinity
  EXPECT_EQ(f32_to_f16(5.9604645e-8f), 0x0001);  // smallest subnormal 2^-24
  EXPECT_EQ(f16_to_f32(0x0001), 5.9604645e-8f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = f16_to_f32(half);
    if (std::isnan(value)) continue;
    ASSERT_EQ(f32_to_f16(value), half) << "bits 0x" << std::hex << bits;
  }
}

TEST(DType, Bf16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = bf16_to_f32(half);
    if (std::isnan(value)) continue;
    ASSERT_EQ(f32_to_bf16(value), half) << "bits 0x" << std::hex << bits;
  }
}

}  // namespace
}  // namespace kvrt
