// decode_linear with the argmax fused in (the LM head of a greedy step): argmax_out must be
// torch.argmax of the very logits the launch wrote (first maximum, NaN the largest), over
// vocabularies from 1 to Llama 3's 128256, on shapes that the library would run on either
// kernel, launch after launch on one workspace (which each launch must leave zero).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;

constexpr uint16_t kBf16NaN = 0x7fc0;

struct Launch {
  int32_t token;
  std::vector<float> logits;
};

// One greedy LM-head launch of W [rows, in] over x [in] (RMS-normalized against `norm`).
Launch run_greedy_head(const DeviceBuffer<uint16_t>& w, const DeviceBuffer<uint16_t>& x,
                       const DeviceBuffer<uint16_t>& norm, int rows, int in,
                       DeviceBuffer<uint8_t>& workspace) {
  DeviceBuffer<float> logits(static_cast<size_t>(rows));
  DeviceBuffer<int32_t> token(1);
  logits.poison();
  token.poison();
  DecodeLinear op;
  op.weight = w.as_bf16();
  op.input = x.as_bf16();
  op.rows = rows;
  op.in = in;
  op.norm_weight = norm.as_bf16();
  op.output_f32 = logits.get();
  op.argmax_out = token.get();
  op.argmax_workspace = workspace.get();
  const Status status = decode_linear(op, nullptr);
  if (!status.ok()) throw std::runtime_error(status.to_string());
  testing::sync_device();
  return {token.download()[0], logits.download()};
}

struct HeadCase {
  int rows;
  int in;
};

class LmHeadArgmaxTest : public ::testing::TestWithParam<HeadCase> {};

// Three launches on one workspace with different x: each answer is the argmax of its own
// logits, so a workspace not returned to zero (a stale best) shows in the second or third.
// Rows 3 and rows - 1 of W are equal, a tie the lowest index must win whenever it is the
// maximum; the third launch scales x so that tie is the maximum.
TEST_P(LmHeadArgmaxTest, TokenIsTheFirstMaximumOfItsOwnLogits) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const HeadCase c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.rows * 7 + c.in));
  auto w_host = random_bf16(static_cast<size_t>(c.rows) * c.in, -1.0f, 1.0f, rng);
  const int tie_a = std::min(3, c.rows - 1), tie_b = c.rows - 1;
  std::vector<uint16_t> x_host = random_bf16(static_cast<size_t>(c.in), -1.0f, 1.0f, rng);
  for (int k = 0; k < c.in; ++k) {  // rows tie_a and tie_b: x's own signs, the largest dot
    const uint16_t one = (x_host[static_cast<size_t>(k)] & 0x8000u) | 0x3f80u;
    w_host[static_cast<size_t>(tie_a) * c.in + k] = one;
    w_host[static_cast<size_t>(tie_b) * c.in + k] = one;
  }
  DeviceBuffer<uint16_t> w(w_host), norm(random_bf16(static_cast<size_t>(c.in), 0.5f, 1.5f, rng));
  DeviceBuffer<uint8_t> workspace(kDecodeLinearArgmaxWorkspaceBytes);
  workspace.zero();
  for (int call = 0; call < 3; ++call) {
    std::vector<uint16_t> xs =
        call == 2 ? x_host : random_bf16(static_cast<size_t>(c.in), -1.0f, 1.0f, rng);
    DeviceBuffer<uint16_t> x(xs);
    const Launch got = run_greedy_head(w, x, norm, c.rows, c.in, workspace);
    EXPECT_EQ(got.token, reference::argmax(got.logits.data(), c.rows)) << "call " << call;
    if (call == 2 && c.rows > 1) {
      EXPECT_EQ(got.token, tie_a) << "the tie goes to the lower index";
    }
  }
  const auto left = workspace.download();
  EXPECT_TRUE(std::all_of(left.begin(), left.end(), [](uint8_t b) { return b == 0; }))
      << "the workspace must be left zero for the next launch";
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, LmHeadArgmaxTest,
                         ::testing::Values(HeadCase{1, 64}, HeadCase{7, 64}, HeadCase{256, 64},
                                           HeadCase{2049, 128}, HeadCase{32000, 2048},
                                           HeadCase{128256, 2048}),
                         [](const ::testing::TestParamInfo<HeadCase>& info) {
                           return testing::param_name("vocab", info.param.rows, "_in",
                                                      info.param.in);
                         });

// A NaN logit is the largest value (torch.argmax), and of two NaNs the first wins, even
// behind +inf-sized values elsewhere.
TEST(LmHeadArgmax, NanIsTheLargestAndTheFirstNanWins) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const int rows = 4000, in = 64;
  std::mt19937 rng(5);
  auto w_host = random_bf16(static_cast<size_t>(rows) * in, -1.0f, 1.0f, rng);
  for (int row : {1234, 3001}) w_host[static_cast<size_t>(row) * in + 5] = kBf16NaN;
  DeviceBuffer<uint16_t> w(w_host), x(random_bf16(static_cast<size_t>(in), -1.0f, 1.0f, rng));
  DeviceBuffer<uint16_t> norm(std::vector<uint16_t>(static_cast<size_t>(in), 0x3f80u));
  DeviceBuffer<uint8_t> workspace(kDecodeLinearArgmaxWorkspaceBytes);
  workspace.zero();
  const Launch got = run_greedy_head(w, x, norm, rows, in, workspace);
  ASSERT_TRUE(std::isnan(got.logits[1234]));
  EXPECT_EQ(got.token, 1234);
  EXPECT_EQ(got.token, reference::argmax(got.logits.data(), rows));
}

TEST(LmHeadArgmax, ArgmaxNeedsOneTokenAndAnF32Output) {
  DecodeLinear op;
  alignas(16) static uint16_t w[64 * 8], x[2 * 64], y[16];
  alignas(16) static float y32[16];
  alignas(16) static uint64_t workspace[2];
  static int32_t token;
  op.weight = reinterpret_cast<const bf16*>(w);
  op.input = reinterpret_cast<const bf16*>(x);
  op.rows = 8;
  op.in = 64;
  op.output_f32 = y32;
  op.argmax_out = &token;
  op.argmax_workspace = workspace;
  op.tokens = 2;
  Status status = decode_linear(op, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.to_string();
  op.tokens = 1;
  op.output_f32 = nullptr;
  op.output = reinterpret_cast<bf16*>(y);
  status = decode_linear(op, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.to_string();
  op.output = nullptr;
  op.output_f32 = y32;
  op.argmax_workspace = nullptr;
  status = decode_linear(op, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find("argmax_workspace"), std::string::npos) << status.to_string();
}

}  // namespace
}  // namespace kvrt::engine::cuda
