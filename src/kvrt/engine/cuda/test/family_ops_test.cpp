// The model-family ops against the CPU reference: row_norm (Llama and Gemma rounding,
// residual add, per-head rows inside a fused qkv row), geglu, scale_bf16, softcap_logits
// with its argmax, rope_kv_write's partial rotary and generic_attention (with and without
// a sliding window); then their argument checks, which need no device.
//
// Tolerances: row_norm and geglu round where the reference (HF) does; an intermediate
// can still land one bf16 ulp apart where the kernel's f32 value (rsqrtf, tanhf) and the
// reference's f64 value straddle a rounding boundary, and the next rounding can carry
// that on: rtol 2^-7, two ulps. Such flips are rare (a few in 10^4), so the rounding
// points themselves are checked by counting bit-exact elements: rounding at the wrong
// place moves about a quarter of them, and each test shows that the alternative
// rounding would fail it. Everything a kernel must not touch is compared bit for bit.
// softcap_logits is f32 (tanhf within 2 ulps): rtol 1e-6. Attention: as
// prefill_attention_test.cpp, atol = rtol = 2^-8.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using testing::to_float;

constexpr uint16_t kBf16NaN = 0x7fc0;
constexpr uint16_t kPattern = 0x3c3c;  // a finite, recognizable value for untouched memory

// How many elements differ from the reference at all (NaN counts as differing).
size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  size_t count = 0;
  for (size_t i = 0; i < got.size(); ++i) count += got[i] == want[i] ? 0 : 1;
  return count;
}

// The rounding points are HF's: at most 1% of the elements (and at least 2 allowed, for
// short tensors) may differ by a boundary flip.
::testing::AssertionResult mostly_exact(const std::vector<float>& got,
                                        const std::vector<float>& want) {
  const size_t bad = mismatches(got, want);
  if (bad <= std::max<size_t>(2, got.size() / 100)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ from the reference's bits";
}

// The opposite: the alternative rounding differs from the reference in more than 5% of
// the elements, so a kernel that rounded that way would fail mostly_exact.
::testing::AssertionResult distinguishable(const std::vector<float>& alternative,
                                           const std::vector<float>& want) {
  const size_t bad = mismatches(alternative, want);
  if (bad * 20 > want.size()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "only " << bad << " of " << want.size() << " elements tell the roundings apart";
}

// ---------------------------------------------------------------------------------------
// row_norm

enum class Residual { kNone, kSeparate, kOut };

struct RowNormCase {
  const char* name;
  int tokens;
  int rows_per_token;
  int width;
  int64_t token_stride;  // 0: dense
  int64_t offset;        // elements of the buffer before the first row (a qkv region)
  bool unit_offset;      // Gemma
  Residual residual;
  bool in_place;  // out == x (with Residual::kOut, out is the residual instead)
};

class RowNormTest : public ::testing::TestWithParam<RowNormCase> {};

TEST_P(RowNormTest, MatchesHfRoundingAndLeavesTheRestAlone) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const RowNormCase c = GetParam();
  const int64_t dense = static_cast<int64_t>(c.rows_per_token) * c.width;
  const int64_t stride = c.token_stride != 0 ? c.token_stride : dense;
  const int rows = c.tokens * c.rows_per_token;
  // Room after the last row too, so a write past it shows.
  const size_t size = static_cast<size_t>(c.offset + (c.tokens - 1) * stride + dense + 24);
  auto row_at = [&](int row) {
    const int t = row / c.rows_per_token, h = row % c.rows_per_token;
    return static_cast<size_t>(c.offset + t * stride + static_cast<int64_t>(h) * c.width);
  };
  std::mt19937 rng(static_cast<uint32_t>(c.tokens * 1000 + c.width * 7 + rows));
  auto x = random_bf16(size, -3.0f, 3.0f, rng);
  // Rows of different scales (powers of two, exact): a row normalized with another row's
  // rms is off by 2x or more.
  for (int r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, r % 5 - 2);
    for (int i = 0; i < c.width; ++i) {
      uint16_t& v = x[row_at(r) + static_cast<size_t>(i)];
      v = f32_to_bf16(bf16_to_f32(v) * scale);
    }
  }
  // Gemma stores w with the 1 taken out (around 0); Llama around 1. Neither all ones.
  const auto weight = c.unit_offset ? random_bf16(static_cast<size_t>(c.width), -0.5f, 0.5f, rng)
                                    : random_bf16(static_cast<size_t>(c.width), 0.5f, 1.5f, rng);
  const auto residual = random_bf16(static_cast<size_t>(rows) * c.width, -4.0f, 4.0f, rng);

  const bool out_is_residual = c.residual == Residual::kOut;
  ASSERT_TRUE(!out_is_residual || (c.offset == 0 && stride == dense && !c.in_place));
  DeviceBuffer<uint16_t> d_x(x), d_weight(weight), d_residual(residual);
  std::vector<uint16_t> out_before(size, kPattern);
  if (c.in_place) out_before = x;
  if (out_is_residual) std::copy(residual.begin(), residual.end(), out_before.begin());
  DeviceBuffer<uint16_t> d_out(out_before);

  RowNorm op;
  op.x = d_x.as_bf16() + c.offset;
  op.out = (c.in_place ? d_x.as_bf16() : d_out.as_bf16()) + c.offset;
  op.weight = d_weight.as_bf16();
  op.residual = c.residual == Residual::kSeparate ? d_residual.as_bf16()
                : out_is_residual                 ? d_out.as_bf16()
                                                  : nullptr;
  op.tokens = c.tokens;
  op.rows_per_token = c.rows_per_token;
  op.token_stride = c.token_stride;
  op.width = c.width;
  op.eps = 1e-6f;
  op.unit_offset = c.unit_offset;
  KVRT_ASSERT_OK(row_norm(op, nullptr));
  testing::sync_device();

  const auto x_f = to_float(x), w_f = to_float(weight), res_f = to_float(residual);
  // The alternative rounding: Gemma's w as Llama's 1 + w (two roundings), or Llama's w
  // rounded once (Gemma's rule with w - 1, exact in f32).
  std::vector<float> w_alt(w_f);
  for (float& w : w_alt) w = c.unit_offset ? 1.0f + w : w - 1.0f;
  const std::vector<uint16_t> got_buf = c.in_place ? d_x.download() : d_out.download();
  std::vector<float> got, want, alt;
  std::vector<bool> in_row(size, false);
  std::vector<float> want_row(static_cast<size_t>(c.width)), alt_row(want_row.size());
  for (int r = 0; r < rows; ++r) {
    const size_t at = row_at(r);
    const float* res =
        c.residual != Residual::kNone ? res_f.data() + static_cast<size_t>(r) * c.width : nullptr;
    reference::row_norm(x_f.data() + at, w_f.data(), res, want_row.data(), c.width, 1e-6f,
                        c.unit_offset);
    reference::row_norm(x_f.data() + at, w_alt.data(), res, alt_row.data(), c.width, 1e-6f,
                        !c.unit_offset);
    for (int i = 0; i < c.width; ++i) {
      in_row[at + static_cast<size_t>(i)] = true;
      got.push_back(bf16_to_f32(got_buf[at + static_cast<size_t>(i)]));
    }
    want.insert(want.end(), want_row.begin(), want_row.end());
    alt.insert(alt.end(), alt_row.begin(), alt_row.end());
  }
  // With a residual, a one-ulp flip of the normed value (|normed| < 4) survives the add
  // as an absolute error however small the sum.
  const double atol = c.residual != Residual::kNone ? 1.0 / 32 : 1e-6;
  EXPECT_TRUE(testing::all_close(got, want, {atol, 1.0 / 128, 4e-3}));
  EXPECT_TRUE(mostly_exact(got, want));
  EXPECT_TRUE(distinguishable(alt, want)) << "the test cannot see the rounding point";
  size_t touched = 0;
  for (size_t i = 0; i < size; ++i) {
    if (!in_row[i] && got_buf[i] != out_before[i] && touched++ < 8) {
      ADD_FAILURE() << "element " << i << " outside the rows changed";
    }
  }
  EXPECT_EQ(touched, 0u);
  if (!c.in_place) {
    EXPECT_TRUE(d_x.download() == x) << "x changed";
  }
  if (c.residual == Residual::kSeparate) {
    EXPECT_TRUE(d_residual.download() == residual) << "residual changed";
  }
}

std::vector<RowNormCase> row_norm_cases() {
  // A fused qkv row of Qwen3-8B's attention (32 q heads, 8 kv heads of 128) and of
  // Gemma 3 1B's (4 q heads, 1 kv head of 256): the q region is rows 0.. of the row, the
  // k region starts after the q heads; v and the other region must stay as they are.
  const int64_t qwen = (32 + 2 * 8) * 128, gemma = (4 + 2 * 1) * 256;
  return {
      // Hidden-size rows: a block per row (16-byte path up to 8192, then elements) or a
      // warp per row (up to 1024).
      {"llama_2048", 1, 1, 2048, 0, 0, false, Residual::kNone, false},
      {"llama_2048_in_place_t9", 9, 1, 2048, 0, 0, false, Residual::kNone, true},
      {"gemma_5376_residual_out", 3, 1, 5376, 0, 0, true, Residual::kOut, false},
      {"gemma_2304_residual_in_place_x", 5, 1, 2304, 0, 0, true, Residual::kSeparate, true},
      {"llama_8200_residual", 2, 1, 8200, 0, 0, false, Residual::kSeparate, false},
      {"gemma_8200_residual_out", 2, 1, 8200, 0, 0, true, Residual::kOut, false},
      {"gemma_640_residual_out", 37, 1, 640, 0, 0, true, Residual::kOut, false},
      {"llama_13_in_place", 3, 1, 13, 0, 0, false, Residual::kNone, true},
      {"gemma_1000_residual", 11, 1, 1000, 0, 0, true, Residual::kSeparate, false},
      // Per-head rows in the fused qkv, in place (Qwen3 q_norm / k_norm; Gemma 3).
      {"qwen3_q_heads", 7, 32, 128, qwen, 0, false, Residual::kNone, true},
      {"qwen3_k_heads", 7, 8, 128, qwen, 32 * 128, false, Residual::kNone, true},
      {"qwen3_k_heads_decode", 1, 8, 128, qwen, 32 * 128, false, Residual::kNone, true},
      {"gemma3_q_heads", 5, 4, 256, gemma, 0, true, Residual::kNone, true},
      {"gemma3_k_heads_decode", 1, 1, 256, gemma, 4 * 256, true, Residual::kNone, true},
      // Into another buffer of the same layout; rows not a multiple of 8 (a part block).
      {"k_heads_64_out_of_place", 37, 3, 64, (8 + 2 * 3) * 64, 8 * 64, false, Residual::kNone,
       false},
      // Element path: a head width not a multiple of 8, and rows off 16-byte alignment.
      {"heads_36_in_place", 5, 4, 36, (4 + 2 * 2) * 36, 0, true, Residual::kNone, true},
      {"heads_128_unaligned", 3, 2, 128, 6 * 128 + 4, 4, false, Residual::kNone, true},
      {"heads_128_residual", 4, 2, 128, 5 * 128, 128, true, Residual::kSeparate, false},
  };
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowNormTest, ::testing::ValuesIn(row_norm_cases()),
                         [](const ::testing::TestParamInfo<RowNormCase>& info) {
                           return std::string(info.param.name);
                         });

// ---------------------------------------------------------------------------------------
// geglu

struct GegluCase {
  int tokens;
  int inter;       // a multiple of 8: the 16-byte path; otherwise the element path
  bool unaligned;  // out one element past a 16-byte boundary: the element path
};

class GegluTest : public ::testing::TestWithParam<GegluCase> {};

TEST_P(GegluTest, MatchesHfRounding) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const GegluCase c = GetParam();
  const int tokens = c.tokens, inter = c.inter;
  std::mt19937 rng(static_cast<uint32_t>(23 + tokens * 7 + inter));
  const auto gate_up = random_bf16(static_cast<size_t>(tokens) * 2 * inter, -6.0f, 6.0f, rng);
  const size_t offset = c.unaligned ? 1 : 0;
  DeviceBuffer<uint16_t> d_in(gate_up), d_out(static_cast<size_t>(tokens) * inter + offset);
  d_out.poison();
  KVRT_ASSERT_OK(geglu(d_in.as_bf16(), d_out.as_bf16() + offset, tokens, inter, nullptr));
  testing::sync_device();
  const auto in = to_float(gate_up);
  auto got = to_float(d_out.download());
  got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(offset));
  std::vector<float> want(got.size());
  // Where gate > -2, f32's 1 + tanh has no cancellation: there the bits must match
  // (mostly), and the product rounded once instead of after the GELU must not.
  std::vector<float> got_exact, want_exact, alt_exact;
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < inter; ++i) {
      const size_t row = static_cast<size_t>(t) * 2 * inter, at = static_cast<size_t>(t) * inter;
      const float gate = in[row + i], up = in[row + inter + i];
      want[at + i] = reference::geglu(gate, up);
      if (gate > -2.0f) {
        const double g = gate;
        const double gelu =
            0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
        got_exact.push_back(got[at + i]);
        want_exact.push_back(want[at + i]);
        alt_exact.push_back(reference::round_bf16(static_cast<float>(gelu * up)));
      }
    }
  }
  // Past gate < -3 the GELU is below 1e-3 and f32's 1 + tanh cancels: atol covers it.
  EXPECT_TRUE(testing::all_close(got, want, {1e-5, 1.0 / 128, 4e-3}));
  EXPECT_TRUE(mostly_exact(got_exact, want_exact));
  if (want_exact.size() >= 100) {
    EXPECT_TRUE(distinguishable(alt_exact, want_exact));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GegluTest,
                         ::testing::Values(GegluCase{5, 776, false}, GegluCase{64, 6912, false},
                                           GegluCase{1, 9216, false}, GegluCase{3, 13, false},
                                           GegluCase{4, 776, true}),
                         [](const ::testing::TestParamInfo<GegluCase>& info) {
                           return testing::param_name("t", info.param.tokens, "_i",
                                                      info.param.inter,
                                                      info.param.unaligned ? "_unaligned" : "");
                         });

// ---------------------------------------------------------------------------------------
// scale_bf16

struct ScaleCase {
  size_t count;
  size_t offset;  // elements past a 16-byte boundary (not 0: the element path)
};

class ScaleBf16Test : public ::testing::TestWithParam<ScaleCase> {};

TEST_P(ScaleBf16Test, MatchesOneF32ProductBitForBit) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const ScaleCase c = GetParam();
  const size_t guard = 9;  // elements after the range, which must stay as they are
  std::mt19937 rng(static_cast<uint32_t>(c.count + c.offset));
  auto x = random_bf16(c.offset + c.count + guard, -4.0f, 4.0f, rng);
  // Zeros, infinities, overflow to infinity and a subnormal, where there is room.
  const uint16_t special[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7f7f, 0x0001};
  for (size_t i = 0; i < std::size(special) && i < c.count; ++i) {
    x[c.offset + i * c.count / std::size(special)] = special[i];
  }
  // Gemma's normalizer sqrt(hidden) as the bf16 tensor holds it: sqrt(3072) -> 55.5.
  const float factor = reference::round_bf16(std::sqrt(3072.0f));
  DeviceBuffer<uint16_t> d_x(x);
  KVRT_ASSERT_OK(scale_bf16(d_x.as_bf16() + c.offset, c.count, factor, nullptr));
  testing::sync_device();
  std::vector<uint16_t> want = x;
  for (size_t i = c.offset; i < c.offset + c.count; ++i) {
    want[i] = f32_to_bf16(bf16_to_f32(x[i]) * factor);
  }
  const auto got = d_x.download();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "element " << i << " (range [" << c.offset << ", "
                               << c.offset + c.count << "))";
  }
}

INSTANTIATE_TEST_SUITE_P(Counts, ScaleBf16Test,
                         ::testing::Values(ScaleCase{1, 0}, ScaleCase{7, 0}, ScaleCase{8, 0},
                                           ScaleCase{8003, 0}, ScaleCase{8003, 3},
                                           ScaleCase{(size_t{1} << 22) + 5, 0}),
                         [](const ::testing::TestParamInfo<ScaleCase>& info) {
                           return testing::param_name("n", info.param.count, "_off",
                                                      info.param.offset);
                         });

// ---------------------------------------------------------------------------------------
// softcap_logits

std::vector<float> random_f32(size_t count, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(count);
  for (float& v : out) v = dist(rng);
  return out;
}

struct SoftcapCase {
  int count;
  size_t offset;  // floats past a 16-byte boundary (not 0: the element path)
  bool argmax;
};

class SoftcapTest : public ::testing::TestWithParam<SoftcapCase> {};

// Two logits far past saturation, the larger one last: capped, both are exactly `cap`,
// and the argmax is the first of them, not the larger input.
TEST_P(SoftcapTest, CapsInPlaceAndTakesTheFirstSaturatedMaximum) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const SoftcapCase c = GetParam();
  const float cap = 30.0f;  // Gemma 2's final_logit_softcapping
  std::mt19937 rng(static_cast<uint32_t>(c.count * 3 + c.offset));
  const size_t guard = 5;
  auto host = random_f32(c.offset + static_cast<size_t>(c.count) + guard, -2 * cap, 2 * cap, rng);
  float* logits = host.data() + c.offset;
  const int tie_a = c.count / 3, tie_b = c.count - 1;
  if (c.count > 1) {
    logits[tie_a] = 15.0f * cap;  // tanh(15) and tanh(40) are 1.0f
    logits[tie_b] = 40.0f * cap;
  }
  DeviceBuffer<float> d_logits(host);
  DeviceBuffer<int32_t> d_token(1);
  d_token.poison();
  KVRT_ASSERT_OK(softcap_logits(d_logits.get() + c.offset, c.count, cap,
                                c.argmax ? d_token.get() : nullptr, nullptr));
  testing::sync_device();
  const auto got_all = d_logits.download();
  std::vector<float> got(got_all.begin() + static_cast<std::ptrdiff_t>(c.offset),
                         got_all.begin() + static_cast<std::ptrdiff_t>(c.offset + c.count));
  std::vector<float> want(got.size());
  for (int i = 0; i < c.count; ++i)
    want[static_cast<size_t>(i)] = reference::softcap(logits[i], cap);
  EXPECT_TRUE(testing::all_close(got, want, {1e-6 * cap, 1e-6, 1e-6}));
  for (size_t i = 0; i < c.offset; ++i) {
    EXPECT_EQ(got_all[i], host[i]) << "before, " << i;
  }
  for (size_t i = c.offset + c.count; i < got_all.size(); ++i) {
    EXPECT_EQ(got_all[i], host[i]) << "after, " << i;
  }
  if (c.count > 1) {
    EXPECT_EQ(got[static_cast<size_t>(tie_a)], cap);
    EXPECT_EQ(got[static_cast<size_t>(tie_b)], cap);
  }
  const int32_t token = d_token.download()[0];
  if (c.argmax) {
    EXPECT_EQ(token, reference::argmax(got.data(), c.count));
    EXPECT_EQ(token, c.count > 1 ? tie_a : 0);
  } else {
    EXPECT_EQ(token, -1) << "argmax_out null: nothing written";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Vocabularies, SoftcapTest,
    ::testing::Values(SoftcapCase{1, 0, true}, SoftcapCase{7, 0, true}, SoftcapCase{4099, 1, true},
                      SoftcapCase{256000, 0, true}, SoftcapCase{262144, 0, true},
                      SoftcapCase{262147, 3, true}, SoftcapCase{262144, 0, false},
                      SoftcapCase{262147, 1, false}),
    [](const ::testing::TestParamInfo<SoftcapCase>& info) {
      return testing::param_name("v", info.param.count, "_off", info.param.offset,
                                 info.param.argmax ? "_argmax" : "");
    });

// NaN is the largest value and the first NaN wins, over +inf (capped to cap) and over
// values that only saturate; -0 and +0 are equal, so of the two the first wins.
TEST(Softcap, NanIsTheLargestAndEqualZerosTieToTheFirst) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const int count = 262144;
  const float cap = 30.0f;
  std::mt19937 rng(9);
  auto host = random_f32(static_cast<size_t>(count), -2 * cap, 2 * cap, rng);
  host[5] = std::numeric_limits<float>::infinity();
  host[77] = 100.0f * cap;
  host[1234] = std::numeric_limits<float>::quiet_NaN();
  host[200000] = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer<float> d_logits(host);
  DeviceBuffer<int32_t> d_token(1);
  d_token.poison();
  KVRT_ASSERT_OK(softcap_logits(d_logits.get(), count, cap, d_token.get(), nullptr));
  testing::sync_device();
  const auto got = d_logits.download();
  EXPECT_TRUE(std::isnan(got[1234]));
  EXPECT_EQ(got[5], cap);
  EXPECT_EQ(d_token.download()[0], 1234);

  std::vector<float> zeros(1000, -1.0f);
  zeros[3] = -0.0f;
  zeros[5] = 0.0f;
  DeviceBuffer<float> d_zeros(zeros);
  d_token.poison();
  KVRT_ASSERT_OK(softcap_logits(d_zeros.get(), 1000, cap, d_token.get(), nullptr));
  testing::sync_device();
  const auto capped = d_zeros.download();
  EXPECT_EQ(d_token.download()[0], reference::argmax(capped.data(), 1000));
  EXPECT_EQ(d_token.download()[0], 3);
}

// ---------------------------------------------------------------------------------------
// rope_kv_write, partial rotary

struct PartialRopeCase {
  int head_dim;
  int rotary_dim;
};

class PartialRopeTest : public ::testing::TestWithParam<PartialRopeCase> {};

TEST_P(PartialRopeTest, TurnsTheRotaryDimsAndPassesTheRestThrough) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const PartialRopeCase c = GetParam();
  const int q_heads = 4, kv_heads = 2, max_seq = 512, dim = c.head_dim, rot = c.rotary_dim;
  const int width = (q_heads + 2 * kv_heads) * dim;
  const std::vector<int32_t> positions = {0, 1, 300, 511, 17, -1, 512};  // last two: nothing
  const int tokens = static_cast<int>(positions.size());
  auto inv_freq = rope_inv_freq(rot, 10000.0f, RopeScaling{});  // HF: over the rotary dims
  KVRT_ASSERT_OK(inv_freq.status());
  std::mt19937 rng(static_cast<uint32_t>(dim * 31 + rot));
  const auto qkv = random_bf16(static_cast<size_t>(tokens) * width, -2.0f, 2.0f, rng);
  const size_t cache_size = static_cast<size_t>(kv_heads) * max_seq * dim;
  const std::vector<uint16_t> pattern(cache_size, kPattern);
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
  op.rotary_dim = rot;
  KVRT_ASSERT_OK(rope_kv_write(op, nullptr));
  testing::sync_device();

  const auto qkv_out = d_qkv.download(), k_out = d_k.download();
  const auto qkv_in = to_float(qkv);
  std::vector<float> got_rot, want_rot;  // rotated dims, q and k
  std::vector<uint16_t> want_qkv = qkv;  // exact except q's rotated dims
  std::vector<uint16_t> want_k = pattern, want_v = pattern;
  for (int t = 0; t < tokens; ++t) {
    const int pos = positions[static_cast<size_t>(t)];
    if (pos < 0 || pos >= max_seq) continue;
    const size_t row = static_cast<size_t>(t) * width;
    for (int h = 0; h < q_heads + kv_heads; ++h) {
      std::vector<float> head(qkv_in.begin() + static_cast<std::ptrdiff_t>(row + h * dim),
                              qkv_in.begin() + static_cast<std::ptrdiff_t>(row + (h + 1) * dim));
      reference::rope_head(head.data(), dim, pos, *inv_freq, 1.0f, rot);
      const bool is_q = h < q_heads;
      const size_t at = is_q ? row + static_cast<size_t>(h) * dim
                             : (static_cast<size_t>(h - q_heads) * max_seq + pos) * dim;
      const std::vector<uint16_t>& out = is_q ? qkv_out : k_out;
      std::vector<uint16_t>& want = is_q ? want_qkv : want_k;
      for (int d = 0; d < dim; ++d) {
        if (d < rot) {  // compared with tolerance below
          got_rot.push_back(bf16_to_f32(out[at + d]));
          want_rot.push_back(head[static_cast<size_t>(d)]);
          want[at + d] = out[at + d];
        } else {  // passed through: the input's bits
          want[at + d] = qkv[row + static_cast<size_t>(h) * dim + d];
        }
      }
      if (!is_q) {
        for (int d = 0; d < dim; ++d) {
          want_v[at + d] = qkv[row + static_cast<size_t>(kv_heads + h) * dim + d];  // v of h
        }
      }
    }
  }
  EXPECT_TRUE(testing::all_close(got_rot, want_rot, {1e-5, 1.0 / 256, 4e-3})) << "rotated dims";
  EXPECT_TRUE(qkv_out == want_qkv) << "qkv: pass-through dims of q, or k/v, changed";
  EXPECT_TRUE(k_out == want_k) << "k cache: pass-through dims or other rows differ";
  EXPECT_TRUE(d_v.download() == want_v) << "v cache differs";
}

INSTANTIATE_TEST_SUITE_P(Dims, PartialRopeTest,
                         // Phi-4-mini (128, 0.75), half of 64, the least, and all of 80.
                         ::testing::Values(PartialRopeCase{128, 96}, PartialRopeCase{64, 32},
                                           PartialRopeCase{96, 2}, PartialRopeCase{80, 80},
                                           PartialRopeCase{32, 24}),
                         [](const ::testing::TestParamInfo<PartialRopeCase>& info) {
                           return testing::param_name("d", info.param.head_dim, "_r",
                                                      info.param.rotary_dim);
                         });

// ---------------------------------------------------------------------------------------
// generic_attention, with a sliding window

struct WindowCase {
  int head_dim;
  int group;
  int tokens;
  int start;   // position of the first token
  int window;  // 0: none
};

class GenericAttentionTest : public ::testing::TestWithParam<WindowCase> {};

TEST_P(GenericAttentionTest, MatchesCpuReference) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const WindowCase c = GetParam();
  const int kv_heads = 2, q_heads = kv_heads * c.group, dim = c.head_dim;
  const int max_seq = c.start + c.tokens + 20;
  const int width = (q_heads + 2 * kv_heads) * dim;  // q read from the fused qkv row
  std::mt19937 rng(static_cast<uint32_t>(dim * 7 + c.group * 131 + c.tokens + c.start + c.window));
  std::vector<int32_t> positions(static_cast<size_t>(c.tokens));
  std::iota(positions.begin(), positions.end(), c.start);
  std::shuffle(positions.begin(), positions.end(), rng);
  const auto qkv = random_bf16(static_cast<size_t>(c.tokens) * width, -2.0f, 2.0f, rng);
  auto k = random_bf16(static_cast<size_t>(kv_heads) * max_seq * dim, -2.0f, 2.0f, rng);
  auto v = random_bf16(k.size(), -1.0f, 1.0f, rng);
  // NaN in every row no query may see: past the last position, and before the first
  // window's start. One read of them makes the output NaN.
  const int live = c.start + c.tokens;
  const int first_seen = c.window > 0 ? std::max(0, c.start - c.window + 1) : 0;
  for (int h = 0; h < kv_heads; ++h) {
    for (int j = 0; j < max_seq; ++j) {
      if (j >= first_seen && j < live) continue;
      for (int d = 0; d < dim; ++d) {
        const size_t i = (static_cast<size_t>(h) * max_seq + j) * dim + d;
        k[i] = v[i] = kBf16NaN;
      }
    }
  }
  DeviceBuffer<uint16_t> d_qkv(qkv), d_k(k), d_v(v);
  DeviceBuffer<uint16_t> d_out(static_cast<size_t>(c.tokens) * q_heads * dim);
  DeviceBuffer<int32_t> d_pos(positions);
  d_out.poison();

  GenericAttention op;
  op.q = d_qkv.as_bf16();
  op.q_token_stride = width;
  op.k_cache = d_k.as_bf16();
  op.v_cache = d_v.as_bf16();
  op.positions = d_pos.get();
  op.out = d_out.as_bf16();
  op.tokens = c.tokens;
  op.q_heads = q_heads;
  op.kv_heads = kv_heads;
  op.head_dim = dim;
  op.max_seq = max_seq;
  op.window = c.window;
  KVRT_ASSERT_OK(generic_attention(op, nullptr));
  testing::sync_device();

  const auto qkv_f = to_float(qkv);
  std::vector<float> q(static_cast<size_t>(c.tokens) * q_heads * dim);
  for (int t = 0; t < c.tokens; ++t) {
    std::copy_n(qkv_f.begin() + static_cast<std::ptrdiff_t>(t) * width, q_heads * dim,
                q.begin() + static_cast<std::ptrdiff_t>(t) * q_heads * dim);
  }
  const std::vector<int> ref_positions(positions.begin(), positions.end());
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  const auto want = reference::attention(q, to_float(k), to_float(v), ref_positions, q_heads,
                                         kv_heads, dim, max_seq, scale, c.window);
  const auto got = to_float(d_out.download());
  EXPECT_TRUE(testing::all_close(got, want, {1.0 / 256, 1.0 / 256, 1e-2}));
  // Where the window cuts keys off, the unwindowed answer must fail the same check.
  if (c.window > 0 && c.start + c.tokens > c.window) {
    auto k_all = to_float(k), v_all = to_float(v);
    for (float* cache : {k_all.data(), v_all.data()}) {  // the NaN rows as zeros instead
      for (size_t i = 0; i < k_all.size(); ++i) cache[i] = std::isnan(cache[i]) ? 0.0f : cache[i];
    }
    const auto full = reference::attention(q, k_all, v_all, ref_positions, q_heads, kv_heads, dim,
                                           max_seq, scale);
    EXPECT_FALSE(testing::all_close(full, want, {1.0 / 256, 1.0 / 256, 1e-2}))
        << "the window changes nothing here: the case tests nothing";
  }
}

std::vector<WindowCase> window_cases() {
  return {
      // No window (the plain causal kernel), decode and prefill.
      {32, 4, 1, 100, 0},
      {256, 2, 37, 5, 0},
      // Decode: window smaller than the position, of one key, exactly the length (all
      // keys), larger than it.
      {32, 4, 1, 100, 16},
      {256, 2, 1, 300, 64},
      {64, 1, 1, 100, 1},
      {16, 4, 1, 100, 101},
      {32, 4, 1, 100, 512},
      // Prefill: every query's window starts somewhere else; one larger than all positions.
      {32, 4, 40, 10, 8},
      {256, 2, 70, 0, 16},
      {128, 8, 33, 200, 40},
      {72, 2, 40, 0, 64},
  };
}

INSTANTIATE_TEST_SUITE_P(Shapes, GenericAttentionTest, ::testing::ValuesIn(window_cases()),
                         [](const ::testing::TestParamInfo<WindowCase>& info) {
                           const WindowCase& c = info.param;
                           return testing::param_name("d", c.head_dim, "_g", c.group, "_t",
                                                      c.tokens, "_start", c.start, "_w", c.window);
                         });

// ---------------------------------------------------------------------------------------
// Argument checks: made before any device work, so they run without a GPU. Valid-looking
// ops over host memory, for each test to break one way.

alignas(16) uint16_t host_bf16[4096];
alignas(16) float host_f32[1024];
alignas(16) int32_t host_i32[16];

::testing::AssertionResult rejected(const Status& status, std::string_view naming) {
  if (status.code() != ErrorCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "not InvalidArgument: " << status.to_string();
  }
  if (status.message().find(naming) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "does not name " << naming << ": " << status.to_string();
  }
  return ::testing::AssertionSuccess();
}

RowNorm host_norm() {
  RowNorm op;
  op.x = reinterpret_cast<const bf16*>(host_bf16);
  op.out = reinterpret_cast<bf16*>(host_bf16);
  op.weight = reinterpret_cast<const bf16*>(host_bf16 + 2048);
  op.tokens = 2;
  op.rows_per_token = 2;
  op.width = 64;
  return op;
}

TEST(RowNormArguments, BadShapesAndPointersAreRejected) {
  RowNorm op = host_norm();
  op.weight = nullptr;
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "weight"));
  op = host_norm();
  op.width = 0;
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "width"));
  op = host_norm();
  op.tokens = 0;
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "tokens"));
  op = host_norm();
  op.rows_per_token = -1;
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "rows_per_token"));
  op = host_norm();
  op.token_stride = 127;  // the two heads of a token are 128 wide
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "token_stride"));
  op = host_norm();
  op.token_stride = -256;
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "token_stride"));
}

TEST(RowNormArguments, OverlapsOtherThanInPlaceAreRejected) {
  RowNorm op = host_norm();
  op.out = reinterpret_cast<bf16*>(host_bf16 + 8);  // overlaps x, not x itself
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "out"));
  op = host_norm();
  op.residual = op.out;  // residual in place needs back-to-back rows
  op.token_stride = 512;
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "residual"));
  op = host_norm();
  op.out = reinterpret_cast<bf16*>(host_bf16 + 1024);
  op.residual = reinterpret_cast<const bf16*>(host_bf16 + 1024 + 64);  // partly over out
  EXPECT_TRUE(rejected(row_norm(op, nullptr), "residual"));
}

TEST(GegluArguments, BadArgumentsAreRejected) {
  const bf16* in = reinterpret_cast<const bf16*>(host_bf16);
  bf16* out = reinterpret_cast<bf16*>(host_bf16 + 2048);
  EXPECT_TRUE(rejected(geglu(nullptr, out, 1, 64, nullptr), "gate_up"));
  EXPECT_TRUE(rejected(geglu(in, out, 0, 64, nullptr), "tokens"));
  EXPECT_TRUE(rejected(geglu(in, out, 1, 0, nullptr), "intermediate"));
  EXPECT_TRUE(
      rejected(geglu(in, reinterpret_cast<bf16*>(host_bf16 + 64), 1, 64, nullptr), "overlap"));
}

TEST(ScaleBf16Arguments, BadArgumentsAreRejected) {
  EXPECT_TRUE(rejected(scale_bf16(nullptr, 8, 2.0f, nullptr), "x"));
  EXPECT_TRUE(rejected(scale_bf16(reinterpret_cast<bf16*>(host_bf16), 0, 2.0f, nullptr), "count"));
}

TEST(SoftcapArguments, BadArgumentsAreRejected) {
  EXPECT_TRUE(rejected(softcap_logits(nullptr, 8, 30.0f, nullptr, nullptr), "logits"));
  EXPECT_TRUE(rejected(softcap_logits(host_f32, 0, 30.0f, nullptr, nullptr), "count"));
  for (float cap : {0.0f, -30.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    EXPECT_TRUE(rejected(softcap_logits(host_f32, 8, cap, host_i32, nullptr), "cap")) << cap;
  }
  EXPECT_TRUE(rejected(
      softcap_logits(host_f32, 8, 30.0f, reinterpret_cast<int32_t*>(host_f32 + 4), nullptr),
      "argmax_out"));
}

RopeKvWrite host_rope() {
  RopeKvWrite op;
  op.qkv = reinterpret_cast<bf16*>(host_bf16);
  op.positions = host_i32;
  op.inv_freq = host_f32;
  op.k_cache = op.v_cache = reinterpret_cast<bf16*>(host_bf16 + 2048);
  op.q_heads = op.kv_heads = 1;
  op.head_dim = 64;
  op.max_seq = 4;
  return op;
}

TEST(RopeKvWriteArguments, RotaryDimMustBeEvenAndWithinTheHead) {
  for (int rotary_dim : {-2, 1, 3, 63, 66}) {
    RopeKvWrite op = host_rope();
    op.rotary_dim = rotary_dim;
    EXPECT_TRUE(rejected(rope_kv_write(op, nullptr), "rotary_dim")) << rotary_dim;
  }
}

TEST(GenericAttentionArguments, NegativeWindowIsRejected) {
  GenericAttention op;
  op.q = reinterpret_cast<const bf16*>(host_bf16);
  op.k_cache = op.v_cache = reinterpret_cast<const bf16*>(host_bf16);
  op.positions = host_i32;
  op.out = reinterpret_cast<bf16*>(host_bf16 + 2048);
  op.tokens = op.q_heads = op.kv_heads = 1;
  op.head_dim = 32;
  op.max_seq = 4;
  op.window = -1;
  EXPECT_TRUE(rejected(generic_attention(op, nullptr), "window"));
}

}  // namespace
}  // namespace kvrt::engine::cuda
