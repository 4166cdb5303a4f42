// rope_inv_freq (host) against HF's formulas, and rope_kv_write against the CPU
// reference: q rotated in place, k rotated into the cache row of its position, v copied,
// and every other cache row left as it was.
//
// Tolerances: the angle is the same f32 product on both sides; the kernel's sincosf is
// within 2 f32 ulps of the reference's f64 cos/sin, far below the final rounding to
// bf16, so rtol = 2^-8 (one bf16 ulp) with atol 1e-5 for results near zero. The v rows
// are copies and must match bit for bit.
#include <cmath>
#include <numbers>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using testing::to_float;

TEST(RopeInvFreq, DefaultMatchesHfFormula) {
  auto table = rope_inv_freq(64, 10000.0f, RopeScaling{});
  KVRT_ASSERT_OK(table.status());
  ASSERT_EQ(table->size(), 32u);
  for (int i = 0; i < 32; ++i) {
    const double want = 1.0 / std::pow(10000.0, 2.0 * i / 64.0);
    EXPECT_NEAR((*table)[static_cast<size_t>(i)], want, 1e-6 * want) << "i = " << i;
  }
}

TEST(RopeInvFreq, Llama3MatchesHfFormula) {
  RopeScaling scaling;  // Llama-3.2-1B: factor 32, low 1, high 4, original 8192
  scaling.type = RopeType::kLlama3;
  scaling.factor = 32.0f;
  auto table = rope_inv_freq(64, 500000.0f, scaling);
  KVRT_ASSERT_OK(table.status());
  const double low_wavelen = 8192.0 / 1.0, high_wavelen = 8192.0 / 4.0;
  int low = 0, medium = 0, high = 0;
  for (int i = 0; i < 32; ++i) {
    const double inv = 1.0 / std::pow(500000.0, 2.0 * i / 64.0);
    const double wavelen = 2.0 * std::numbers::pi / inv;
    double want = inv;
    if (wavelen > low_wavelen) {
      want = inv / 32.0;
      ++low;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1.0 - smooth) * inv / 32.0 + smooth * inv;
      ++medium;
    } else {
      ++high;
    }
    EXPECT_NEAR((*table)[static_cast<size_t>(i)], want, 1e-5 * want) << "i = " << i;
  }
  EXPECT_GT(low, 0);  // the table exercises all three bands
  EXPECT_GT(medium, 0);
  EXPECT_GT(high, 0);
}

TEST(RopeInvFreq, OddHeadDimIsRejected) {
  EXPECT_EQ(rope_inv_freq(63, 10000.0f, RopeScaling{}).status().code(),
            ErrorCode::kInvalidArgument);
}

struct RopeCase {
  int head_dim;
  bool llama3;
};

class RopeKvWriteTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeKvWriteTest, RotatesQueryInPlaceAndWritesCacheRows) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const RopeCase c = GetParam();
  const int q_heads = 4, kv_heads = 2, max_seq = 4096, dim = c.head_dim;
  const int width = (q_heads + 2 * kv_heads) * dim;
  // The last two tokens have positions outside [0, max_seq): they must change nothing.
  const std::vector<int32_t> positions = {0, 1, 300, 4095, 17, -1, 4096};
  const int tokens = static_cast<int>(positions.size());
  RopeScaling scaling;
  if (c.llama3) scaling.type = RopeType::kLlama3;
  auto inv_freq = rope_inv_freq(dim, 500000.0f, scaling);
  KVRT_ASSERT_OK(inv_freq.status());

  std::mt19937 rng(static_cast<uint32_t>(dim));
  const auto qkv = random_bf16(static_cast<size_t>(tokens) * width, -2.0f, 2.0f, rng);
  const size_t cache_size = static_cast<size_t>(kv_heads) * max_seq * dim;
  const std::vector<uint16_t> pattern(cache_size, 0x3c3c);  // a finite, recognizable value
  DeviceBuffer<uint16_t> d_qkv(qkv), d_k(pattern), d_v(pattern);
  DeviceBuffer<int32_t> d_pos(positions);
  DeviceBuffer<float> d_freq(*inv_freq);

  RopeKvWrite op;
  op.qkv = d_qkv.as_bf16();
  op.positions = d_pos.get();
  op.inv_freq = d_freq.get();
  op.tokens = tokens;
  op.q_heads = q_heads;
  op.kv_heads = kv_heads;
  op.head_dim = dim;
  op.k_cache = d_k.as_bf16();
  op.v_cache = d_v.as_bf16();
  op.max_seq = max_seq;
  KVRT_ASSERT_OK(rope_kv_write(op, nullptr));
  testing::sync_device();

  const auto qkv_in = to_float(qkv);
  std::vector<float> want_qkv = qkv_in;  // k and v inside qkv are not modified
  std::vector<uint16_t> want_k = pattern, want_v = pattern;
  std::vector<float> want_k_rows, got_k_rows;
  const auto k_out = d_k.download();
  for (int t = 0; t < tokens; ++t) {
    const int pos = positions[static_cast<size_t>(t)];
    if (pos < 0 || pos >= max_seq) continue;
    float* row = want_qkv.data() + static_cast<size_t>(t) * width;
    for (int h = 0; h < q_heads; ++h)
      reference::rope_head(row + h * dim, dim, pos, *inv_freq, 1.0f);
    for (int h = 0; h < kv_heads; ++h) {
      std::vector<float> k(row + (q_heads + h) * dim, row + (q_heads + h + 1) * dim);
      reference::rope_head(k.data(), dim, pos, *inv_freq, 1.0f);
      const size_t at = (static_cast<size_t>(h) * max_seq + pos) * dim;
      for (int d = 0; d < dim; ++d) {
        want_k_rows.push_back(k[static_cast<size_t>(d)]);
        got_k_rows.push_back(bf16_to_f32(k_out[at + d]));
        want_k[at + d] = k_out[at + d];  // compared above, with tolerance
        want_v[at + d] = qkv[static_cast<size_t>(t) * width + (q_heads + kv_heads + h) * dim + d];
      }
    }
  }
  const testing::Tolerance tolerance{1e-5, 1.0 / 256, 4e-3};
  EXPECT_TRUE(testing::all_close(to_float(d_qkv.download()), want_qkv, tolerance)) << "qkv";
  EXPECT_TRUE(testing::all_close(got_k_rows, want_k_rows, tolerance)) << "k cache rows";
  EXPECT_TRUE(k_out == want_k) << "k cache rows other than the tokens' positions changed";
  EXPECT_TRUE(d_v.download() == want_v) << "v cache differs";
}

INSTANTIATE_TEST_SUITE_P(HeadDims, RopeKvWriteTest,
                         ::testing::Values(RopeCase{64, false}, RopeCase{80, false},
                                           RopeCase{128, true}, RopeCase{64, true},
                                           RopeCase{34, false}),
                         [](const ::testing::TestParamInfo<RopeCase>& info) {
                           return testing::param_name("d", info.param.head_dim,
                                                      info.param.llama3 ? "_llama3" : "_default");
                         });

}  // namespace
}  // namespace kvrt::engine::cuda
