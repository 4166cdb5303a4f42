// The op layer's attribute parsing and its pre-write checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kvrt/engine/cpu/ops.h"

namespace kvrt::engine::cpu {
namespace {

TEST(Ops, UnknownOpIsNotSupported) {
  EXPECT_EQ(prepare_op("conv2d", "n", nlohmann::json::object()).status().code(),
            ErrorCode::kNotSupported);
}

TEST(Ops, MissingOrMistypedAttributesNameTheNodeAndField) {
  Result<PreparedOp> no_eps = prepare_op("rms_norm", "layers.0.norm", nlohmann::json::object());
  ASSERT_FALSE(no_eps.ok());
  EXPECT_EQ(no_eps.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(no_eps.status().message().find("layers.0.norm"), std::string::npos);
  EXPECT_NE(no_eps.status().message().find("eps"), std::string::npos);

  EXPECT_FALSE(prepare_op("attention", "a",
                          {{"num_heads", 3}, {"num_kv_heads", 2}, {"head_dim", 4}, {"scale", 1}})
                   .ok());
  EXPECT_FALSE(prepare_op("rope", "r", {{"num_heads", 1}, {"head_dim", 3}, {"theta", 1e4}}).ok());
  EXPECT_FALSE(
      prepare_op(
          "rope", "r",
          {{"num_heads", 1}, {"head_dim", 4}, {"theta", 1e4}, {"scaling", {{"type", "yarn"}}}})
          .ok());
  EXPECT_TRUE(prepare_op("rope", "r", {{"num_heads", 1}, {"head_dim", 4}, {"theta", 1e4}}).ok());
}

TEST(Ops, InferRejectsMismatchedShapes) {
  PreparedOp op = *prepare_op("linear", "proj", nlohmann::json::object());
  const TensorType x{DType::kF32, Shape{2, 3}}, w{DType::kF32, Shape{4, 5}};
  const TensorType in[] = {x, w};
  Result<TensorType> out = infer_output(op, in);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("proj"), std::string::npos);
  const TensorType good_in[] = {x, {DType::kBF16, Shape{4, 3}}};
  ASSERT_TRUE(infer_output(op, good_in).ok());
  EXPECT_EQ(infer_output(op, good_in)->shape, (Shape{2, 4}));
}

TEST(Ops, TokenOutsideTheVocabularyIsRejectedBeforeAnyWrite) {
  PreparedOp op = *prepare_op("embedding", "embed", nlohmann::json::object());
  int32_t tokens[] = {1, 5};
  std::vector<float> table(8, 1.0f), out(4, -7.0f);
  const TensorView in[] = {TensorView(tokens, DType::kI32, {1, 2}),
                           TensorView(table.data(), DType::kF32, {4, 2})};
  const TensorView outs[] = {TensorView(out.data(), DType::kF32, {2, 2})};
  Status status = check_op(op, in, outs);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("token id 5"), std::string::npos);
  tokens[1] = 3;
  EXPECT_TRUE(check_op(op, in, outs).ok());
}

TEST(Ops, CacheWritePastCapacityOrNegativePositionIsRejected) {
  PreparedOp op = *prepare_op("kv_cache_write", "k_write", nlohmann::json::object());
  std::vector<float> cache(1 * 4 * 2), rows(2 * 2);
  int32_t position = 3;
  const TensorView in[] = {TensorView(cache.data(), DType::kF32, {1, 4, 2}),
                           TensorView(rows.data(), DType::kF32, {2, 2}),
                           TensorView(&position, DType::kI32, {1})};
  const TensorView outs[] = {in[0]};
  EXPECT_EQ(check_op(op, in, outs).code(), ErrorCode::kInvalidArgument);  // 3 + 2 > 4
  position = -1;
  EXPECT_EQ(check_op(op, in, outs).code(), ErrorCode::kInvalidArgument);
  position = 2;
  EXPECT_TRUE(check_op(op, in, outs).ok());
}

TEST(Ops, CacheWriteOutputMustBeTheCacheStorage) {
  PreparedOp op = *prepare_op("kv_cache_write", "k_write", nlohmann::json::object());
  std::vector<float> cache(8), other(8), rows(2);
  int32_t position = 0;
  const TensorView in[] = {TensorView(cache.data(), DType::kF32, {1, 4, 2}),
                           TensorView(rows.data(), DType::kF32, {1, 2}),
                           TensorView(&position, DType::kI32, {1})};
  const TensorView outs[] = {TensorView(other.data(), DType::kF32, {1, 4, 2})};
  Status status = check_op(op, in, outs);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("in-place"), std::string::npos);
}

TEST(Ops, RunComputesTakeLast) {
  PreparedOp op = *prepare_op("take_last", "last", nlohmann::json::object());
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, out(2);
  const TensorView in[] = {TensorView(x.data(), DType::kF32, {3, 2})};
  const TensorView outs[] = {TensorView(out.data(), DType::kF32, {1, 2})};
  ASSERT_TRUE(check_op(op, in, outs).ok());
  run_op(op, in, outs, nullptr);
  EXPECT_EQ(out, (std::vector<float>{5, 6}));
}

TEST(Ops, ArgmaxPicksTheLowestIndexOfTheLargestLogitAndNaNAsLargest) {
  PreparedOp op = *prepare_op("argmax", "next_token", nlohmann::json::object());
  std::vector<float> logits = {0.5f, 2.0f,          -1.0f, 2.0f,  //
                               1.0f, std::nanf(""), 3.0f,  std::nanf("")};
  int32_t out[2] = {-1, -1};
  const TensorView in[] = {TensorView(logits.data(), DType::kF32, {2, 4})};
  const TensorView outs[] = {TensorView(out, DType::kI32, {2, 1})};
  ASSERT_TRUE(check_op(op, in, outs).ok());
  run_op(op, in, outs, nullptr);
  EXPECT_EQ(out[0], 1);  // tie between 1 and 3: the lower id, as the sampler and torch do
  EXPECT_EQ(out[1], 1);  // NaN is the largest value (torch.argmax)
  const TensorView wrong[] = {TensorView(logits.data(), DType::kF32, {2, 1})};
  EXPECT_EQ(check_op(op, in, wrong).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvrt::engine::cpu
