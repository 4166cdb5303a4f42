#include "kvrt/export/weight_convert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace kvrt::exporter {
namespace {

std::vector<float> ramp(size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i % 1000) * 0.01f - 5.0f;
  return values;
}

TEST(WeightConvert, F32ToBf16RoundsLikeCore) {
  const auto values = ramp(1024);
  std::vector<uint16_t> out(values.size());
  ASSERT_TRUE(convert_weight(std::as_bytes(std::span(values)), DType::kF32,
                             std::as_writable_bytes(std::span(out)), DType::kBF16)
                  .ok());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i], f32_to_bf16(values[i]));
}

TEST(WeightConvert, F16ToF32IsExact) {
  std::vector<uint16_t> halves = {0x3c00, 0xc000, 0x0001, 0x7bff};
  std::vector<float> out(halves.size());
  ASSERT_TRUE(convert_weight(std::as_bytes(std::span(halves)), DType::kF16,
                             std::as_writable_bytes(std::span(out)), DType::kF32)
                  .ok());
  for (size_t i = 0; i < halves.size(); ++i) EXPECT_EQ(out[i], f16_to_f32(halves[i]));
}

TEST(WeightConvert, SameDtypeIsACopy) {
  const auto values = ramp(77);
  std::vector<float> out(values.size());
  ASSERT_TRUE(convert_weight(std::as_bytes(std::span(values)), DType::kF32,
                             std::as_writable_bytes(std::span(out)), DType::kF32)
                  .ok());
  EXPECT_EQ(out, values);
}

TEST(WeightConvert, LargeTensorsSplitAcrossThreadsGiveTheSameBytes) {
  const auto values = ramp(5u << 20);  // 20 MB of f32: above the parallel threshold
  std::vector<uint16_t> out(values.size());
  ASSERT_TRUE(convert_weight(std::as_bytes(std::span(values)), DType::kF32,
                             std::as_writable_bytes(std::span(out)), DType::kBF16)
                  .ok());
  for (size_t i = 0; i < values.size(); i += 4093) EXPECT_EQ(out[i], f32_to_bf16(values[i]));
  EXPECT_EQ(out.back(), f32_to_bf16(values.back()));
}

TEST(WeightConvert, SizeMismatchIsAnError) {
  const auto values = ramp(8);
  std::vector<uint16_t> out(7);
  EXPECT_FALSE(convert_weight(std::as_bytes(std::span(values)), DType::kF32,
                              std::as_writable_bytes(std::span(out)), DType::kBF16)
                   .ok());
}

TEST(WeightConvert, IntegersAreNotConverted) {
  std::vector<int32_t> values = {1, 2};
  std::vector<float> out(2);
  EXPECT_FALSE(convert_weight(std::as_bytes(std::span(values)), DType::kI32,
                              std::as_writable_bytes(std::span(out)), DType::kF32)
                   .ok());
}

}  // namespace
}  // namespace kvrt::exporter
