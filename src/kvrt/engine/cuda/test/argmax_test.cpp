// argmax (two-stage) against torch.argmax's rules: exact index of the first maximum,
// NaN as the largest value, over vocabularies from 1 to Llama 3's 128256 and 1..3 rows.
#include <cmath>
#include <limits>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;

// Runs argmax on `logits` [rows, vocab] and returns the device's answer.
std::vector<int32_t> run_argmax(const std::vector<float>& logits, int rows, int vocab) {
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<int32_t> d_out(static_cast<size_t>(rows));
  d_out.poison();
  const size_t bytes = argmax_workspace_bytes(rows, vocab);
  DeviceBuffer<uint8_t> d_workspace(bytes);
  const Status status =
      argmax(d_logits.get(), rows, vocab, d_workspace.get(), bytes, d_out.get(), nullptr);
  if (!status.ok()) throw std::runtime_error(status.to_string());
  testing::sync_device();
  return d_out.download();
}

struct ArgmaxCase {
  int rows;
  int vocab;
};

class ArgmaxTest : public ::testing::TestWithParam<ArgmaxCase> {};

TEST_P(ArgmaxTest, FindsFirstMaximum) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const ArgmaxCase c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.vocab + c.rows));
  std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
  std::vector<float> logits(static_cast<size_t>(c.rows) * c.vocab);
  for (auto& v : logits) v = dist(rng);
  for (int r = 0; r < c.rows; ++r) {  // a tie for the maximum in each row, late indices
    float* row = logits.data() + static_cast<size_t>(r) * c.vocab;
    const int a = (c.vocab - 1) * (r + 1) / (c.rows + 1), b = c.vocab - 1;
    row[a] = row[b] = 100.0f + static_cast<float>(r);
  }
  const auto got = run_argmax(logits, c.rows, c.vocab);
  for (int r = 0; r < c.rows; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)],
              reference::argmax(logits.data() + static_cast<size_t>(r) * c.vocab, c.vocab))
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, ArgmaxTest,
                         ::testing::Values(ArgmaxCase{1, 1}, ArgmaxCase{1, 7}, ArgmaxCase{2, 2049},
                                           ArgmaxCase{1, 32000}, ArgmaxCase{3, 128256}),
                         [](const ::testing::TestParamInfo<ArgmaxCase>& info) {
                           return testing::param_name("rows", info.param.rows, "_vocab",
                                                      info.param.vocab);
                         });

TEST(ArgmaxSpecialValues, NanWinsAndAllMinusInfinityGivesZero) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const int vocab = 5000;
  std::vector<float> logits(2 * vocab, -std::numeric_limits<float>::infinity());
  logits[vocab + 10] = 1.0f;
  logits[vocab + 4321] = std::numeric_limits<float>::quiet_NaN();
  logits[vocab + 4500] = std::numeric_limits<float>::quiet_NaN();
  const auto got = run_argmax(logits, 2, vocab);
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[1], 4321);
}

// Argument checks happen before any device work, so they run without a GPU too.
TEST(ArgmaxArguments, MisalignedWorkspaceIsRejectedNamingIt) {
  alignas(16) static float host[64];
  int32_t out = 0;
  void* workspace = reinterpret_cast<char*>(host) + 2;  // not where a float can live
  const Status status = argmax(host, 1, 8, workspace, sizeof(host) - 2, &out, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("workspace must be 4-byte aligned"), std::string::npos)
      << status.to_string();
}

}  // namespace
}  // namespace kvrt::engine::cuda
