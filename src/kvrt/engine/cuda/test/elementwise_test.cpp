// rmsnorm, swiglu and embedding_gather against the CPU reference.
//
// Tolerances: rmsnorm and swiglu round at the same points as the reference (HF's). An
// intermediate can still land one bf16 ulp apart when the kernel's f32 value and the
// reference's f64 value straddle a rounding boundary (inv_rms comes from rsqrtf; silu
// from expf), and the next rounding can carry that into the output: rtol 2^-7, two
// ulps. The gather is a copy and must match bit for bit.
#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using testing::to_float;

struct NormCase {
  int tokens;
  int hidden;
  bool in_place;
};

class RmsNormTest : public ::testing::TestWithParam<NormCase> {};

TEST_P(RmsNormTest, MatchesHfRounding) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const NormCase c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.tokens * 100 + c.hidden));
  const auto x = random_bf16(static_cast<size_t>(c.tokens) * c.hidden, -3.0f, 3.0f, rng);
  const auto gamma = random_bf16(static_cast<size_t>(c.hidden), 0.5f, 1.5f, rng);
  DeviceBuffer<uint16_t> d_x(x), d_gamma(gamma), d_y(x.size());
  d_y.poison();
  bf16* y = c.in_place ? d_x.as_bf16() : d_y.as_bf16();
  KVRT_ASSERT_OK(rmsnorm(d_x.as_bf16(), d_gamma.as_bf16(), y, c.tokens, c.hidden, 1e-6f, nullptr));
  testing::sync_device();
  const auto ref = reference::rmsnorm(to_float(x), to_float(gamma), c.tokens, c.hidden, 1e-6f);
  const auto got = to_float(c.in_place ? d_x.download() : d_y.download());
  EXPECT_TRUE(testing::all_close(got, ref, {1e-6, 1.0 / 128, 4e-3}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         // 16-byte path up to 8192 (four chunks a thread); 13 and 8200 take
                         // the element path.
                         ::testing::Values(NormCase{1, 2048, false}, NormCase{3, 776, true},
                                           NormCase{300, 2048, false}, NormCase{2, 8, false},
                                           NormCase{1, 13, true}, NormCase{4, 8192, true},
                                           NormCase{2, 8200, false}),
                         [](const ::testing::TestParamInfo<NormCase>& info) {
                           return testing::param_name("t", info.param.tokens, "_h",
                                                      info.param.hidden,
                                                      info.param.in_place ? "_in_place" : "");
                         });

struct SwigluCase {
  int tokens;
  int inter;       // a multiple of 8: the 16-byte path; otherwise the element path
  bool unaligned;  // out one element past a 16-byte boundary: the element path
};

class SwigluTest : public ::testing::TestWithParam<SwigluCase> {};

TEST_P(SwigluTest, MatchesHfRounding) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const SwigluCase c = GetParam();
  const int tokens = c.tokens, inter = c.inter;
  std::mt19937 rng(static_cast<uint32_t>(11 + tokens * 7 + inter));
  const auto gate_up = random_bf16(static_cast<size_t>(tokens) * 2 * inter, -6.0f, 6.0f, rng);
  const size_t offset = c.unaligned ? 1 : 0;
  DeviceBuffer<uint16_t> d_in(gate_up), d_out(static_cast<size_t>(tokens) * inter + offset);
  d_out.poison();
  bf16* out = d_out.as_bf16() + offset;
  KVRT_ASSERT_OK(swiglu(d_in.as_bf16(), out, tokens, inter, nullptr));
  testing::sync_device();
  const auto in = to_float(gate_up);
  std::vector<float> ref(static_cast<size_t>(tokens) * inter);
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < inter; ++i) {
      const size_t row = static_cast<size_t>(t) * 2 * inter;
      ref[static_cast<size_t>(t) * inter + i] = reference::swiglu(in[row + i], in[row + inter + i]);
    }
  }
  auto got = to_float(d_out.download());
  got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(offset));
  EXPECT_TRUE(testing::all_close(got, ref, {1e-6, 1.0 / 128, 4e-3}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwigluTest,
                         ::testing::Values(SwigluCase{5, 776, false}, SwigluCase{64, 5632, false},
                                           SwigluCase{3, 13, false}, SwigluCase{4, 776, true}),
                         [](const ::testing::TestParamInfo<SwigluCase>& info) {
                           return testing::param_name("t", info.param.tokens, "_i",
                                                      info.param.inter,
                                                      info.param.unaligned ? "_unaligned" : "");
                         });

struct GatherCase {
  int vocab;
  int hidden;  // 776: the 16-byte path; 13: the element path
};

class EmbeddingGatherTest : public ::testing::TestWithParam<GatherCase> {};

TEST_P(EmbeddingGatherTest, CopiesRowsAndZeroesInvalidIds) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const GatherCase c = GetParam();
  std::mt19937 rng(3);
  const auto table = random_bf16(static_cast<size_t>(c.vocab) * c.hidden, -1.0f, 1.0f, rng);
  const std::vector<int32_t> ids = {5, 0, c.vocab - 1, -1, c.vocab, 5, 17};
  DeviceBuffer<uint16_t> d_table(table), d_out(ids.size() * c.hidden);
  DeviceBuffer<int32_t> d_ids(ids);
  d_out.poison();
  KVRT_ASSERT_OK(embedding_gather(d_table.as_bf16(), c.vocab, c.hidden, d_ids.get(),
                                  static_cast<int>(ids.size()), d_out.as_bf16(), nullptr));
  testing::sync_device();
  const auto out = d_out.download();
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int d = 0; d < c.hidden; ++d) {
      const bool valid = ids[i] >= 0 && ids[i] < c.vocab;
      const uint16_t want = valid ? table[static_cast<size_t>(ids[i]) * c.hidden + d] : 0;
      ASSERT_EQ(out[i * c.hidden + d], want)
          << "token slot " << i << " (id " << ids[i] << "), element " << d;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingGatherTest,
                         ::testing::Values(GatherCase{1000, 776}, GatherCase{50, 13}),
                         [](const ::testing::TestParamInfo<GatherCase>& info) {
                           return testing::param_name("v", info.param.vocab, "_h",
                                                      info.param.hidden);
                         });

}  // namespace
}  // namespace kvrt::engine::cuda
