// The ops and op attributes that only some model families use (Qwen3 and Gemma 3 per-head
// norms, Gemma's (1 + weight) norm, GeGLU and embedding scale, Gemma 3 soft-capping and
// sliding windows, Phi-3's partial rotary and fused projections), against values
// computed by hand from Hugging Face transformers' formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kvrt/engine/cpu/kernels.h"
#include "kvrt/engine/cpu/ops.h"

namespace kvrt::engine::cpu {
namespace {

using nlohmann::json;

// Runs a prepared op on f32 inputs of the given shapes; returns the output.
std::vector<float> run(const PreparedOp& op, std::vector<std::vector<float>*> data,
                       std::vector<Shape> shapes, const Shape& out_shape) {
  std::vector<TensorView> in;
  for (size_t i = 0; i < data.size(); ++i) {
    in.emplace_back(data[i]->data(), DType::kF32, shapes[i]);
  }
  std::vector<float> out(static_cast<size_t>(*out_shape.numel()), -7.0f);
  const TensorView outs[] = {TensorView(out.data(), DType::kF32, out_shape)};
  Status checked = check_op(op, in, outs);
  EXPECT_TRUE(checked.ok()) << checked.to_string();
  if (checked.ok()) run_op(op, in, outs, nullptr);
  return out;
}

TEST(FamilyOps, RmsNormWithUnitOffsetScalesByOnePlusWeight) {
  // Gemma: x * rsqrt(mean(x^2) + eps) * (1 + w). mean = 7.5, eps 0.5 -> 1/sqrt(8).
  std::vector<float> x = {1, 2, 3, 4}, w = {0, -0.5f, 1, 0.25f};
  PreparedOp op = *prepare_op("rms_norm", "norm", {{"eps", 0.5}, {"unit_offset", true}});
  const std::vector<float> out = run(op, {&x, &w}, {{1, 4}, {4}}, {1, 4});
  const float s = 1.0f / std::sqrt(8.0f);
  EXPECT_FLOAT_EQ(out[0], 1 * s * 1.0f);
  EXPECT_FLOAT_EQ(out[1], 2 * s * 0.5f);
  EXPECT_FLOAT_EQ(out[2], 3 * s * 2.0f);
  EXPECT_FLOAT_EQ(out[3], 4 * s * 1.25f);
}

TEST(FamilyOps, PerHeadRmsNormNormalizesEachHeadWithOneWeight) {
  // Qwen3 q_norm: x [T=1, 2 heads * 2]; head 0 = (3, 4): mean 12.5; head 1 = (1, -1): mean 1.
  std::vector<float> x = {3, 4, 1, -1}, w = {0.5f, 2};
  PreparedOp op = *prepare_op("rms_norm", "q_norm", {{"eps", 0.0}, {"head_dim", 2}});
  const std::vector<float> out = run(op, {&x, &w}, {{1, 4}, {2}}, {1, 4});
  const float r0 = 1.0f / std::sqrt(12.5f);
  EXPECT_FLOAT_EQ(out[0], 0.5f * (3 * r0));
  EXPECT_FLOAT_EQ(out[1], 2.0f * (4 * r0));
  EXPECT_FLOAT_EQ(out[2], 0.5f * 1.0f);
  EXPECT_FLOAT_EQ(out[3], 2.0f * -1.0f);
  // The weight must be one head wide.
  const TensorType types[] = {{DType::kF32, Shape{1, 4}}, {DType::kF32, Shape{4}}};
  EXPECT_FALSE(infer_output(op, types).ok());
}

TEST(FamilyOps, PartialRotaryRotatesTheLeadingDimsAndPassesTheRest) {
  // Phi-3: head_dim 4, rotary_dim 2: inv_freq = [1] (theta^0); pair (x0, x1) turns by
  // angle P, x2 and x3 pass through.
  std::vector<float> x = {1, 2, 3, 4};
  int32_t position = 3;
  PreparedOp op = *prepare_op(
      "rope", "rope", {{"num_heads", 1}, {"head_dim", 4}, {"rotary_dim", 2}, {"theta", 10000.0}});
  ASSERT_EQ(op.inv_freq, (std::vector<float>{1.0f}));
  std::vector<float> out(4);
  const TensorView in[] = {TensorView(x.data(), DType::kF32, {1, 4}),
                           TensorView(&position, DType::kI32, {1})};
  const TensorView outs[] = {TensorView(out.data(), DType::kF32, {1, 4})};
  ASSERT_TRUE(check_op(op, in, outs).ok());
  run_op(op, in, outs, nullptr);
  const float c = std::cos(3.0f), s = std::sin(3.0f);
  EXPECT_FLOAT_EQ(out[0], 1 * c - 2 * s);
  EXPECT_FLOAT_EQ(out[1], 2 * c + 1 * s);
  EXPECT_EQ(out[2], 3);
  EXPECT_EQ(out[3], 4);
  EXPECT_FALSE(prepare_op("rope", "r",
                          {{"num_heads", 1}, {"head_dim", 4}, {"rotary_dim", 3}, {"theta", 1e4}})
                   .ok());
  EXPECT_FALSE(prepare_op("rope", "r",
                          {{"num_heads", 1}, {"head_dim", 4}, {"rotary_dim", 6}, {"theta", 1e4}})
                   .ok());
}

TEST(FamilyOps, LinearRopeScalingDividesTheFrequencies) {
  PreparedOp op = *prepare_op("rope", "r",
                              {{"num_heads", 1},
                               {"head_dim", 4},
                               {"theta", 10000.0},
                               {"scaling", {{"type", "linear"}, {"factor", 8.0}}}});
  ASSERT_EQ(op.inv_freq.size(), 2u);
  EXPECT_FLOAT_EQ(op.inv_freq[0], 1.0f / 8);
  EXPECT_FLOAT_EQ(op.inv_freq[1], 0.01f / 8);
  EXPECT_FALSE(prepare_op("rope", "r",
                          {{"num_heads", 1},
                           {"head_dim", 4},
                           {"theta", 10000.0},
                           {"scaling", {{"type", "linear"}, {"factor", 0}}}})
                   .ok());
}

TEST(FamilyOps, SlidingWindowAttentionReadsOnlyTheLastWindowRows) {
  // D = 1, one head; query at P = 2 with window 2 reads rows 1 and 2 only (row 0 is NaN).
  std::vector<float> q = {1}, k = {NAN, 1, 2, NAN}, v = {NAN, 20, 30, NAN};
  int32_t position = 2;
  PreparedOp op = *prepare_op(
      "attention", "att",
      {{"num_heads", 1}, {"num_kv_heads", 1}, {"head_dim", 1}, {"scale", 1.0}, {"window", 2}});
  std::vector<float> out(1);
  const TensorView in[] = {
      TensorView(q.data(), DType::kF32, {1, 1}), TensorView(k.data(), DType::kF32, {1, 4, 1}),
      TensorView(v.data(), DType::kF32, {1, 4, 1}), TensorView(&position, DType::kI32, {1})};
  const TensorView outs[] = {TensorView(out.data(), DType::kF32, {1, 1})};
  ASSERT_TRUE(check_op(op, in, outs).ok());
  run_op(op, in, outs, nullptr);
  const double p1 = std::exp(1.0) / (std::exp(1.0) + std::exp(2.0));
  EXPECT_NEAR(out[0], 20 * p1 + 30 * (1 - p1), 1e-5);
  EXPECT_FALSE(
      prepare_op(
          "attention", "a",
          {{"num_heads", 1}, {"num_kv_heads", 1}, {"head_dim", 1}, {"scale", 1.0}, {"window", -1}})
          .ok());
}

TEST(FamilyOps, WindowAsLongAsTheContextChangesNothing) {
  const int64_t T = 3, NH = 2, KVH = 1, D = 4, S = 8, P = 2;
  std::vector<float> q(T * NH * D), k(KVH * S * D), v(KVH * S * D);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.3f * static_cast<float>(i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.7f * static_cast<float>(i));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i % 11);
  std::vector<float> full(q.size()), windowed(q.size()), narrow(q.size());
  kernels::attention(q.data(), T, k.data(), v.data(), DType::kF32, S, NH, KVH, D, 0.5f, P,
                     full.data(), nullptr);
  kernels::attention(q.data(), T, k.data(), v.data(), DType::kF32, S, NH, KVH, D, 0.5f, P,
                     windowed.data(), nullptr, P + T);
  kernels::attention(q.data(), T, k.data(), v.data(), DType::kF32, S, NH, KVH, D, 0.5f, P,
                     narrow.data(), nullptr, 2);
  EXPECT_EQ(full, windowed);
  EXPECT_NE(full, narrow);
}

TEST(FamilyOps, GeluTanhMulFollowsPytorchsTanhApproximation) {
  std::vector<float> gate = {0.0f, 1.0f, -3.0f, 2.5f}, up = {5.0f, 2.0f, 1.0f, -1.0f};
  PreparedOp op = *prepare_op("gelu_tanh_mul", "mlp.gelu_mul", json::object());
  const std::vector<float> out = run(op, {&gate, &up}, {{1, 4}, {1, 4}}, {1, 4});
  for (size_t i = 0; i < gate.size(); ++i) {
    const double x = gate[i];
    const double gelu = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(out[i], gelu * up[i], 1e-6) << i;
  }
  EXPECT_NEAR(out[1], 2 * 0.8411920, 1e-6);  // gelu_tanh(1) = 0.841192
}

TEST(FamilyOps, ScaleSoftcapAndSliceByHand) {
  std::vector<float> x = {1, -2, 30, 0, 4, 6};
  PreparedOp scale = *prepare_op("scale", "embed_scale", {{"factor", 8.0}});
  EXPECT_EQ(run(scale, {&x}, {{2, 3}}, {2, 3}), (std::vector<float>{8, -16, 240, 0, 32, 48}));

  PreparedOp cap = *prepare_op("softcap", "logit_softcap", {{"cap", 15.0}});
  const std::vector<float> capped = run(cap, {&x}, {{1, 6}}, {1, 6});
  EXPECT_FLOAT_EQ(capped[2], std::tanh(2.0f) * 15);  // 30 -> 15 tanh(2)
  EXPECT_FLOAT_EQ(capped[0], std::tanh(1.0f / 15) * 15);
  EXPECT_EQ(capped[3], 0);
  EXPECT_FALSE(prepare_op("softcap", "c", {{"cap", 0.0}}).ok());

  PreparedOp slice = *prepare_op("slice", "qkv.k", {{"begin", 1}, {"size", 2}});
  EXPECT_EQ(run(slice, {&x}, {{2, 3}}, {2, 2}), (std::vector<float>{-2, 30, 4, 6}));
  PreparedOp too_far = *prepare_op("slice", "qkv.v", {{"begin", 2}, {"size", 2}});
  const TensorType types[] = {{DType::kF32, Shape{2, 3}}};
  Result<TensorType> inferred = infer_output(too_far, types);
  ASSERT_FALSE(inferred.ok());
  EXPECT_NE(inferred.status().message().find("qkv.v"), std::string::npos);
  EXPECT_FALSE(prepare_op("slice", "s", {{"begin", -1}, {"size", 2}}).ok());
}

TEST(FamilyOps, MistypedFamilyAttributesNameTheNodeAndField) {
  Result<PreparedOp> bad =
      prepare_op("rms_norm", "layers.0.attn.q_norm", {{"eps", 1e-6}, {"unit_offset", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layers.0.attn.q_norm"), std::string::npos);
  EXPECT_NE(bad.status().message().find("unit_offset"), std::string::npos);
  EXPECT_FALSE(prepare_op("scale", "s", json::object()).ok());
}

}  // namespace
}  // namespace kvrt::engine::cpu
