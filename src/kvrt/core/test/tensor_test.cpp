#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "kvrt/core/tensor.h"

namespace kvrt {
namespace {

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(parse_device("cpu")->to_string(), "cpu");
  EXPECT_EQ(parse_device("cuda")->to_string(), "cuda:0");
  EXPECT_EQ(*parse_device("cuda:3"), Device::cuda(3));
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", ""}) {
    EXPECT_FALSE(parse_device(bad).ok()) << bad;
  }
}

TEST(Shape, NumelAndPrinting) {
  Shape shape{2, 3, 4};
  EXPECT_EQ(shape.rank(), 3);
  EXPECT_EQ(*shape.numel(), 24);
  EXPECT_EQ(shape.to_string(), "[2, 3, 4]");
  EXPECT_EQ(*Shape{}.numel(), 1);  // a scalar
}

TEST(Shape, NumelOverflowIsAnError) {
  const int64_t big = int64_t{1} << 40;
  auto count = Shape{big, big}.numel();
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().code(), ErrorCode::kInvalidArgument);
}

TEST(Shape, NegativeDimIsAnError) {
  EXPECT_FALSE((Shape{2, -1}.numel().ok()));
}

TEST(Shape, RankAboveMaximumIsRejected) {
  std::vector<int64_t> dims(Shape::kMaxRank + 1, 1);
  EXPECT_FALSE(Shape::from_span(dims).ok());
  dims.pop_back();
  EXPECT_TRUE(Shape::from_span(dims).ok());
}

TEST(TensorView, ContiguousViewBytes) {
  std::vector<float> data(24);
  TensorView view(data.data(), DType::kF32, Shape{2, 3, 4});
  EXPECT_TRUE(view.is_contiguous());
  EXPECT_EQ(*view.nbytes(), 96);
  EXPECT_EQ(view.strides(), (Shape{12, 4, 1}));
  EXPECT_FALSE(view.empty());
}

TEST(TensorView, TransposedViewIsNotContiguous) {
  std::vector<uint16_t> data(6);
  TensorView view(data.data(), DType::kBF16, Shape{3, 2}, Shape{1, 3}, Device::cpu());
  EXPECT_FALSE(view.is_contiguous());
  EXPECT_EQ(*view.nbytes(), 12);
  EXPECT_FALSE(view.reshaped(Shape{6}).ok());
}

TEST(TensorView, ByteSizeOverflowIsAnError) {
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  TensorView view(nullptr, DType::kF32, Shape{huge});
  auto bytes = view.nbytes();
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("overflows"), std::string::npos);
}

TEST(TensorView, ZeroSizedViewIsEmpty) {
  TensorView view(nullptr, DType::kF16, Shape{4, 0, 8});
  EXPECT_TRUE(view.empty());
  EXPECT_EQ(*view.nbytes(), 0);
}

TEST(TensorView, ReshapeKeepsStorageAndChecksCount) {
  std::vector<int32_t> data(12);
  TensorView view(data.data(), DType::kI32, Shape{3, 4}, Device::cuda(1));
  auto flat = view.reshaped(Shape{12});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->data(), data.data());
  EXPECT_EQ(flat->device(), Device::cuda(1));
  EXPECT_FALSE(view.reshaped(Shape{5}).ok());
}

TEST(CheckedMath, DetectsOverflowAndNegatives) {
  int64_t out = 0;
  EXPECT_TRUE(checked_mul(1 << 20, 1 << 20, &out));
  EXPECT_EQ(out, int64_t{1} << 40);
  EXPECT_FALSE(checked_mul(std::numeric_limits<int64_t>::max(), 2, &out));
  EXPECT_FALSE(checked_add(std::numeric_limits<int64_t>::max(), 1, &out));
  EXPECT_FALSE(checked_mul(-1, 2, &out));
}

}  // namespace
}  // namespace kvrt
