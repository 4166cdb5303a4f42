// PrefillLinear (cuBLASLt) against the CPU reference: row-major W used as stored, the
// residual through the C operand (in place too), the bias through the BIAS epilogue,
// token counts from 1 to 128.
//
// Tolerances: same bf16 inputs, f32 accumulation inside cuBLASLt, one rounding to bf16
// at the end: rtol = 2^-8 (one bf16 ulp), atol = 1e-3 * rms(ref) for cancellation.
#include <cmath>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using testing::to_float;

struct GemmCase {
  int tokens;
  int rows;
  int in;
  bool residual;
  bool bias = false;
};

class PrefillLinearTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(PrefillLinearTest, MatchesCpuReference) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const GemmCase c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.tokens * 131 + c.rows * 7 + c.in));
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(c.in));
  const auto w = random_bf16(static_cast<size_t>(c.rows) * c.in, -w_scale, w_scale, rng);
  const auto x = random_bf16(static_cast<size_t>(c.tokens) * c.in, -2.0f, 2.0f, rng);
  const auto res = random_bf16(static_cast<size_t>(c.tokens) * c.rows, -1.0f, 1.0f, rng);
  const auto bias = random_bf16(static_cast<size_t>(c.rows), -0.5f, 0.5f, rng);
  DeviceBuffer<uint16_t> d_w(w), d_x(x), d_res(res), d_bias(bias);

  auto linear = PrefillLinear::create();
  KVRT_ASSERT_OK(linear.status());
  // With a residual the output is the residual's own storage (h += W x in place).
  bf16* out = d_res.as_bf16();
  DeviceBuffer<uint16_t> d_y(static_cast<size_t>(c.tokens) * c.rows);
  if (!c.residual) {
    d_y.poison();
    out = d_y.as_bf16();
  }
  KVRT_ASSERT_OK((*linear)->run(d_w.as_bf16(), d_x.as_bf16(), c.tokens, c.rows, c.in,
                                c.residual ? d_res.as_bf16() : nullptr, out, nullptr,
                                c.bias ? d_bias.as_bf16() : nullptr));
  testing::sync_device();

  auto ref = reference::linear(to_float(w), to_float(x), c.tokens, c.rows, c.in);
  if (c.residual) {
    const auto resf = to_float(res);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += resf[i];
  }
  if (c.bias) {
    const auto biasf = to_float(bias);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += biasf[i % static_cast<size_t>(c.rows)];
  }
  const auto got = to_float(c.residual ? d_res.download() : d_y.download());
  EXPECT_TRUE(testing::all_close(got, ref, {1e-3 * testing::rms(ref), 1.0 / 256, 4e-3}));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillLinearTest,
    ::testing::Values(GemmCase{1, 2048, 2048, false}, GemmCase{17, 1000, 776, false},
                      GemmCase{128, 2560, 2048, false}, GemmCase{64, 2048, 5632, true},
                      GemmCase{33, 257, 264, true},
                      // Qwen2's q/k/v bias; a bias beside a residual.
                      GemmCase{128, 1152, 896, false, true}, GemmCase{17, 1000, 776, false, true},
                      GemmCase{64, 2048, 5632, true, true}),
    [](const ::testing::TestParamInfo<GemmCase>& info) {
      const GemmCase& c = info.param;
      return testing::param_name("t", c.tokens, "_rows", c.rows, "_in", c.in,
                                 c.residual ? "_residual" : "", c.bias ? "_bias" : "");
    });

TEST(PrefillLinearTest, RepeatedShapeReusesPlanAndAgrees) {
  KVRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  const auto w = random_bf16(64 * 128, -0.1f, 0.1f, rng);
  const auto x = random_bf16(9 * 128, -1.0f, 1.0f, rng);
  DeviceBuffer<uint16_t> d_w(w), d_x(x), d_a(9 * 64), d_b(9 * 64);
  auto linear = PrefillLinear::create(0);  // no workspace: still finds an algorithm
  KVRT_ASSERT_OK(linear.status());
  KVRT_ASSERT_OK(
      (*linear)->run(d_w.as_bf16(), d_x.as_bf16(), 9, 64, 128, nullptr, d_a.as_bf16(), nullptr));
  KVRT_ASSERT_OK(
      (*linear)->run(d_w.as_bf16(), d_x.as_bf16(), 9, 64, 128, nullptr, d_b.as_bf16(), nullptr));
  testing::sync_device();
  EXPECT_EQ(d_a.download(), d_b.download());
}

TEST(PrefillLinearTest, MisalignedBiasIsRejectedNamingBias) {
  KVRT_REQUIRE_CUDA_DEVICE();
  DeviceBuffer<uint16_t> d_w(64 * 128), d_x(9 * 128), d_y(9 * 64), d_bias(72);
  auto linear = PrefillLinear::create(0);
  KVRT_ASSERT_OK(linear.status());
  const Status status = (*linear)->run(d_w.as_bf16(), d_x.as_bf16(), 9, 64, 128, nullptr,
                                       d_y.as_bf16(), nullptr, d_bias.as_bf16() + 1);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bias"), std::string::npos) << status.to_string();
}

}  // namespace
}  // namespace kvrt::engine::cuda
