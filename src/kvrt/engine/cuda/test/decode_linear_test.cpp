// decode_linear (tensor-core GEMV with fused RMSNorm / SwiGLU / bias / residual) against the CPU
// reference, over awkward shapes: rows not a multiple of the 8-row tile, in not a
// multiple of the 32-wide k-step, 1..8 tokens, x staged past 64 KiB.
//
// Tolerances: inputs are the same bf16 values on both sides and the kernel accumulates
// in f32, so the dominant error is the final rounding to bf16 (<= 2^-9 relative) plus
// f32 summation order (~1e-6 relative). rtol = 2^-8 covers one bf16 ulp; where the
// kernel rounds intermediates (SwiGLU's gate, up and silu, as HF does) an intermediate
// can land one ulp apart when the f32 and f64 sums straddle a rounding boundary, hence
// 2^-7 there. atol = 1e-3 * rms(ref) absorbs cancellation in outputs near zero. With a
// residual the kernel rounds W·x to bf16 before the add (as the bf16 layer does), so the
// same straddle can put that intermediate on the other bf16 neighbour of the exact sum,
// one ulp of W·x, which the add does not shrink when the residual cancels it; each
// output is held to the reference built from whichever neighbour it is closer to.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using testing::to_float;

enum class Variant { kPlain, kNorm, kResidual, kResidualInPlace, kSwiglu, kNormSwiglu, kNormF32 };

struct LinearCase {
  int tokens;
  int rows;
  int in;
  Variant variant;
  bool bias = false;  // [rows] (or [2·rows] with SwiGLU) added before any rounding
};

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kPlain:
      return "plain";
    case Variant::kNorm:
      return "norm";
    case Variant::kResidual:
      return "residual";
    case Variant::kResidualInPlace:
      return "residual_in_place";
    case Variant::kSwiglu:
      return "swiglu";
    case Variant::kNormSwiglu:
      return "norm_swiglu";
    case Variant::kNormF32:
      return "norm_f32";
  }
  return "?";
}

// The bf16 value next to `rounded` (itself a bf16 value) on the side of `exact`.
float other_bf16_neighbour(float rounded, float exact) {
  if (rounded == exact || rounded == 0.0f) return rounded;
  uint32_t bits = 0;
  std::memcpy(&bits, &rounded, sizeof(bits));
  const bool away_from_zero = (exact > rounded) == (rounded > 0.0f);
  bits = away_from_zero ? bits + 0x10000u : bits - 0x10000u;
  float out = 0.0f;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// `tuning`: the launch's geometry (default: the library's choice).
void check_linear(const LinearCase& c, const DecodeLinearTuning& tuning = {}) {
  const bool norm = c.variant == Variant::kNorm || c.variant == Variant::kNormSwiglu ||
                    c.variant == Variant::kNormF32;
  const bool swiglu = c.variant == Variant::kSwiglu || c.variant == Variant::kNormSwiglu;
  const bool residual = c.variant == Variant::kResidual || c.variant == Variant::kResidualInPlace;
  const bool f32 = c.variant == Variant::kNormF32;
  const int mats = swiglu ? 2 : 1;
  std::mt19937 rng(static_cast<uint32_t>(c.tokens * 7919 + c.rows * 31 + c.in));

  const float w_scale = 1.0f / std::sqrt(static_cast<float>(c.in));
  const auto w = random_bf16(static_cast<size_t>(mats) * c.rows * c.in, -w_scale, w_scale, rng);
  const auto x = random_bf16(static_cast<size_t>(c.tokens) * c.in, -2.0f, 2.0f, rng);
  const auto gamma = random_bf16(static_cast<size_t>(c.in), 0.5f, 1.5f, rng);
  const auto res = random_bf16(static_cast<size_t>(c.tokens) * c.rows, -1.0f, 1.0f, rng);
  const auto bias = random_bf16(static_cast<size_t>(mats) * c.rows, -0.5f, 0.5f, rng);
  DeviceBuffer<uint16_t> d_w(w), d_x(x), d_gamma(gamma), d_res(res), d_bias(bias);
  DeviceBuffer<uint16_t> d_y(static_cast<size_t>(c.tokens) * c.rows);
  DeviceBuffer<float> d_y32(static_cast<size_t>(c.tokens) * c.rows);
  d_y.poison();
  d_y32.poison();

  DecodeLinear op;
  op.weight = d_w.as_bf16();
  op.input = d_x.as_bf16();
  op.tokens = c.tokens;
  op.rows = c.rows;
  op.in = c.in;
  op.norm_weight = norm ? d_gamma.as_bf16() : nullptr;
  op.norm_eps = 1e-5f;
  op.swiglu = swiglu;
  op.bias = c.bias ? d_bias.as_bf16() : nullptr;
  op.tuning = tuning;
  if (c.variant == Variant::kResidualInPlace) {
    op.residual = d_res.as_bf16();
    op.output = d_res.as_bf16();
  } else {
    op.residual = residual ? d_res.as_bf16() : nullptr;
    if (f32) {
      op.output_f32 = d_y32.get();
    } else {
      op.output = d_y.as_bf16();
    }
  }
  KVRT_ASSERT_OK(decode_linear(op, nullptr));
  testing::sync_device();

  const auto wf = to_float(w), resf = to_float(res);
  const auto xf =
      norm ? reference::rmsnorm(to_float(x), to_float(gamma), c.tokens, c.in, 1e-5f) : to_float(x);
  std::vector<float> ref = reference::linear(wf, xf, c.tokens, c.rows, c.in);
  std::vector<float> up;
  if (swiglu) {
    up = reference::linear(wf, xf, c.tokens, c.rows, c.in, static_cast<size_t>(c.rows) * c.in);
  }
  if (c.bias) {  // in the f32 (here f64-exact) sum, before any rounding
    const auto biasf = to_float(bias);
    for (size_t i = 0; i < ref.size(); ++i) {
      const size_t row = i % static_cast<size_t>(c.rows);
      ref[i] += biasf[row];
      if (swiglu) up[i] += biasf[static_cast<size_t>(c.rows) + row];
    }
  }
  if (swiglu) {
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = reference::swiglu(ref[i], up[i]);
  }
  std::vector<float> out;
  if (f32) {
    out = d_y32.download();
  } else {
    out = to_float(c.variant == Variant::kResidualInPlace ? d_res.download() : d_y.download());
  }
  if (residual) {
    for (size_t i = 0; i < ref.size(); ++i) {
      const float rounded = reference::round_bf16(ref[i]);
      const float nearest = rounded + resf[i];
      const float other = other_bf16_neighbour(rounded, ref[i]) + resf[i];
      ref[i] = std::fabs(out[i] - other) < std::fabs(out[i] - nearest) ? other : nearest;
    }
  }
  const double scale = testing::rms(ref);
  const testing::Tolerance tolerance{1e-3 * scale, swiglu ? 1.0 / 128 : 1.0 / 256, 4e-3};
  EXPECT_TRUE(testing::all_close(out, ref, tolerance));
}

class DecodeLinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(DecodeLinearTest, MatchesCpuReference) {
  KVRT_REQUIRE_CUDA_DEVICE();
  check_linear(GetParam());
}

// The library's choice is a function of the shape alone, with every field set, so a
// launch that names part of its geometry gets the library's choice for the rest.
TEST(DecodeLinearTuningTest, LibraryChoiceSetsEveryFieldForEveryShape) {
  for (const auto& [tokens, w_rows, in] :
       {std::tuple{1, 2560, 2048}, std::tuple{1, 2048, 2048}, std::tuple{1, 11264, 2048},
        std::tuple{1, 2048, 5632}, std::tuple{1, 32000, 2048}, std::tuple{8, 16384, 2048},
        std::tuple{4, 3072, 8192}, std::tuple{1, 1152, 896}}) {
    SCOPED_TRACE(testing::param_name("t", tokens, "_rows", w_rows, "_in", in));
    const DecodeLinearTuning t = decode_linear_tuning(tokens, w_rows, in);
    EXPECT_NE(t.kernel, DecodeLinearKernel::kDefault);
    EXPECT_GT(t.blocks_per_sm, 0);
    EXPECT_GE(t.balanced_grid, 0);
    EXPECT_GT(t.stage_keys, 0);
    EXPECT_GE(t.stages, 2);
    EXPECT_GE(t.contiguous, 0);
    EXPECT_GE(t.row_pad, 0);
    EXPECT_GE(t.one_token_x, 0);
    EXPECT_GT(t.split_k, 0);
    const DecodeLinearTuning again = decode_linear_tuning(tokens, w_rows, in);
    EXPECT_EQ(again.kernel, t.kernel);
    EXPECT_EQ(again.stages, t.stages);
    EXPECT_EQ(again.blocks_per_sm, t.blocks_per_sm);
  }
}

// Every launch geometry the benchmark compares computes the same thing. Ring kernel:
// thin and wide slots (a tile split into many slots, or one), rows padded by 16, 64 or
// 0 bytes and one contiguous run per tile, shallow and deep rings, one and several blocks per
// multiprocessor, grids balanced or filling every block slot, x in registers (whole-row
// slots over in <= 2048; one token's over all lanes or in token 0's) or staged in
// shared memory. Direct kernel: 1, 2, 4 and 8 warps per tile (8, one token and
// in <= 8192: its one-token path, a block per tile, one to four chunks per thread,
// every epilogue with and without norm).
TEST(DecodeLinearTuningTest, EveryGeometryMatchesCpuReference) {
  KVRT_REQUIRE_CUDA_DEVICE();
  auto ring = [](int stage_keys, int stages, int contiguous, int per_sm, int balanced = 1,
                 int row_pad = -1) {
    DecodeLinearTuning t;
    t.balanced_grid = balanced;
    t.row_pad = row_pad;
    t.kernel = DecodeLinearKernel::kRing;
    t.stage_keys = stage_keys;
    t.stages = stages;
    t.contiguous = contiguous;
    t.blocks_per_sm = per_sm;
    return t;
  };
  auto one_token_x = [&](int over_all_lanes, int stages, int per_sm) {
    DecodeLinearTuning t = ring(2048, stages, 1, per_sm, 0);
    t.one_token_x = over_all_lanes;
    return t;
  };
  auto direct = [](int split_k, int per_sm, int balanced = 1) {
    DecodeLinearTuning t;
    t.balanced_grid = balanced;
    t.kernel = DecodeLinearKernel::kDirect;
    t.split_k = split_k;
    t.blocks_per_sm = per_sm;
    return t;
  };
  const DecodeLinearTuning tunings[] = {ring(32, 2, 0, 1),
                                        ring(256, 16, 0, 4),
                                        ring(1024, 4, 1, 1),
                                        ring(2048, 3, 1, 2),
                                        ring(8192, 2, 1, 1),
                                        ring(8192, 3, 0, 1),
                                        ring(1024, 6, 0, 2, 0),
                                        direct(1, 3),
                                        direct(2, 2),
                                        direct(4, 1),
                                        direct(8, 3),
                                        direct(8, 2, 0),
                                        ring(1024, 4, 0, 2, 0, 0),
                                        ring(1024, 4, 0, 2, 1, 64),
                                        ring(96, 3, 0, 1, 1, 0),
                                        one_token_x(0, 3, 1),
                                        one_token_x(1, 2, 2)};
  const LinearCase cases[] = {
      {1, 2560, 2048, Variant::kNorm},
      {1, 300, 5632, Variant::kResidual},
      {3, 77, 776, Variant::kNormSwiglu},
      {8, 520, 8192, Variant::kResidualInPlace},
      {2, 1003, 2056, Variant::kNormF32},
      {1, 7, 776, Variant::kSwiglu},
      // x in registers (whole-row slots, in <= 2048): every token count, in
      // not a multiple of the 32 keys a warp's k-step covers.
      {8, 300, 2048, Variant::kNormSwiglu},
      {5, 64, 1000, Variant::kNorm},
      {7, 45, 2040, Variant::kResidual},
      // Staged x: a norm weight wider than the chunks loaded before the PDL wait.
      {1, 40, 9000, Variant::kNorm},
      // Residuals loaded a tile (round) ahead of the epilogue, in place, over blocks that
      // own several tiles (and rounds of the direct kernel with one warp per tile).
      {2, 8200, 1024, Variant::kResidualInPlace},
      {1, 26000, 256, Variant::kResidualInPlace},
      // One token, x in registers, a ring that W streams through: every epilogue.
      {1, 77, 1024, Variant::kNormSwiglu},
      {1, 1003, 2048, Variant::kNormF32},
      {1, 9000, 1536, Variant::kPlain},
      // One token, rows of one 16-byte chunk (a single chunk per row).
      {1, 13, 8, Variant::kResidual},
      // One token, in past 2048 (the one-token direct path's two and three chunks per
      // thread, copied into shared memory, the last chunk partial).
      {1, 33, 2056, Variant::kPlain},
      {1, 100, 3000, Variant::kNormF32},
      {1, 77, 4104, Variant::kNormSwiglu},
      {1, 50, 6144, Variant::kResidualInPlace},
      // Four chunks per thread: one in registers, three copied into shared memory.
      {1, 300, 8192, Variant::kResidual},
      {1, 61, 7000, Variant::kNormSwiglu},
      {1, 40, 6152, Variant::kNormF32},
      // A bias with every epilogue, on every path: one token in registers (q/k/v) and
      // copied (three and four chunks), several tokens staged or in registers.
      {1, 2560, 2048, Variant::kNorm, true},
      {3, 77, 776, Variant::kNormSwiglu, true},
      {1, 300, 8192, Variant::kResidual, true},
      {2, 1003, 2056, Variant::kNormF32, true},
      {1, 77, 1024, Variant::kNormSwiglu, true},
      {1, 100, 5000, Variant::kResidualInPlace, true},
      {8, 300, 2048, Variant::kPlain, true}};
  for (const DecodeLinearTuning& tuning : tunings) {
    for (const LinearCase& c : cases) {
      SCOPED_TRACE(testing::param_name(
          tuning.kernel == DecodeLinearKernel::kRing ? "ring" : "direct", "_stage_keys",
          tuning.stage_keys, "_stages", tuning.stages, "_contiguous", tuning.contiguous, "_pad",
          tuning.row_pad, "_split_k", tuning.split_k, "_per_sm", tuning.blocks_per_sm, "_balanced",
          tuning.balanced_grid, "_one_token_x", tuning.one_token_x, "_t", c.tokens, "_rows", c.rows,
          "_in", c.in, "_", variant_name(c.variant), c.bias ? "_bias" : ""));
      check_linear(c, tuning);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeLinearTest,
    ::testing::Values(
        // Model-like shapes (TinyLlama qkv, o_proj, gate/up, down, a vocab slice).
        LinearCase{1, 2560, 2048, Variant::kNorm}, LinearCase{1, 2048, 2048, Variant::kResidual},
        LinearCase{1, 5632, 2048, Variant::kNormSwiglu},
        LinearCase{1, 2048, 5632, Variant::kResidualInPlace},
        LinearCase{1, 1003, 2048, Variant::kNormF32},
        // Awkward shapes: partial tiles, partial k-steps, tiny matrices, 1..8 tokens.
        LinearCase{2, 257, 776, Variant::kPlain}, LinearCase{4, 33, 8, Variant::kPlain},
        LinearCase{8, 1000, 2056, Variant::kNorm}, LinearCase{8, 300, 1024, Variant::kSwiglu},
        LinearCase{3, 100, 520, Variant::kResidual}, LinearCase{5, 77, 264, Variant::kNormSwiglu},
        LinearCase{7, 1, 8, Variant::kNorm}, LinearCase{1, 7, 776, Variant::kSwiglu},
        LinearCase{6, 129, 2048, Variant::kNormF32}, LinearCase{8, 4100, 5632, Variant::kPlain},
        // x staged in more than 64 KiB of shared memory (8 tokens x 8192).
        LinearCase{8, 520, 8192, Variant::kResidualInPlace},
        // Larger models, with the library's own geometry for each (a matrix's shape class
        // is set by its bytes and width, not its role): Llama-3.1-8B's q/k/v, o_proj,
        // gate/up and down (14 slots a row), gate/up at 4 tokens, down at 5 (x staged in
        // 140 KiB, just under the limit), a 164 MB LM head slice 4096 wide;
        // Llama-3.2-3B's q/k/v; Qwen2.5-0.5B's q/k/v, down and its whole LM head (896
        // wide: 112 chunks a row).
        LinearCase{1, 6144, 4096, Variant::kNorm},
        LinearCase{1, 4096, 4096, Variant::kResidualInPlace},
        LinearCase{1, 14336, 4096, Variant::kNormSwiglu},
        LinearCase{1, 4096, 14336, Variant::kResidualInPlace},
        LinearCase{4, 14336, 4096, Variant::kNormSwiglu},
        LinearCase{5, 4096, 14336, Variant::kResidual},
        LinearCase{1, 20000, 4096, Variant::kNormF32}, LinearCase{1, 5120, 3072, Variant::kNorm},
        LinearCase{1, 1152, 896, Variant::kNorm}, LinearCase{1, 896, 4864, Variant::kResidual},
        LinearCase{1, 151936, 896, Variant::kNormF32},
        // Llama-3.2-3B's o_proj, gate/up and down (one token's rows of 3072 keys take the
        // down class's geometry).
        LinearCase{1, 3072, 3072, Variant::kResidual},
        LinearCase{1, 8192, 3072, Variant::kNormSwiglu},
        LinearCase{1, 3072, 8192, Variant::kResidualInPlace},
        // Several tokens' gate/up on slots narrower than 2048 keys: Qwen2.5-0.5B's at 8
        // tokens (896-key slots, one block per SM, 10 deep) and 3 (two blocks per SM, 3
        // deep), Llama-3.2-3B's at 7 (two 1536-key slots a row, x staged, the ring
        // fitted to two blocks per SM).
        LinearCase{3, 4864, 896, Variant::kNormSwiglu},
        LinearCase{8, 4864, 896, Variant::kNormSwiglu},
        LinearCase{7, 8192, 3072, Variant::kNormSwiglu},
        // Biases: Qwen2.5-0.5B's and Qwen2.5-1.5B's q/k/v (1 and 4 tokens), and Llama's
        // attention_bias / mlp_bias on o_proj (in place), gate/up and down.
        LinearCase{1, 1152, 896, Variant::kNorm, true},
        LinearCase{4, 1152, 896, Variant::kNorm, true},
        LinearCase{1, 2048, 1536, Variant::kNorm, true},
        LinearCase{1, 2048, 2048, Variant::kResidualInPlace, true},
        LinearCase{1, 5632, 2048, Variant::kNormSwiglu, true},
        LinearCase{8, 5632, 2048, Variant::kNormSwiglu, true},
        LinearCase{1, 2048, 5632, Variant::kResidual, true},
        LinearCase{5, 257, 776, Variant::kResidual, true}),
    [](const ::testing::TestParamInfo<LinearCase>& info) {
      const LinearCase& c = info.param;
      return testing::param_name("t", c.tokens, "_rows", c.rows, "_in", c.in, "_",
                                 variant_name(c.variant), c.bias ? "_bias" : "");
    });

// Argument checks happen before any device work, so they run without a GPU too.
alignas(16) uint16_t g_host[64];

DecodeLinear valid_op() {
  DecodeLinear op;
  op.weight = reinterpret_cast<const bf16*>(g_host);
  op.input = reinterpret_cast<const bf16*>(g_host + 16);
  op.output = reinterpret_cast<bf16*>(g_host + 32);
  op.rows = 2;
  op.in = 8;
  return op;
}

TEST(DecodeLinearArguments, InNotMultipleOf8IsRejected) {
  DecodeLinear op = valid_op();
  op.in = 12;
  EXPECT_EQ(decode_linear(op, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(DecodeLinearArguments, MoreThanEightTokensIsRejected) {
  DecodeLinear op = valid_op();
  op.tokens = 9;
  EXPECT_EQ(decode_linear(op, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(DecodeLinearArguments, OutputOverlappingInputIsRejected) {
  DecodeLinear op = valid_op();
  op.output = reinterpret_cast<bf16*>(g_host + 20);
  const Status status = decode_linear(op, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("overlap"), std::string::npos) << status.to_string();
}

TEST(DecodeLinearArguments, TwoOutputsAreRejected) {
  DecodeLinear op = valid_op();
  op.output_f32 = reinterpret_cast<float*>(g_host + 48);
  EXPECT_EQ(decode_linear(op, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(DecodeLinearArguments, XPastTheStagingLimitIsNotSupported) {
  DecodeLinear op = valid_op();
  op.tokens = 6;  // 6 x 14336 x 2 bytes = 168 KiB of x: past what a block stages
  op.in = 14336;
  op.input = reinterpret_cast<const bf16*>(0x100000);
  op.output = reinterpret_cast<bf16*>(0x200000);  // never touched: rejected first
  const Status status = decode_linear(op, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kNotSupported) << status.to_string();
  EXPECT_NE(status.message().find("staging limit"), std::string::npos) << status.to_string();
}

TEST(DecodeLinearArguments, OddBiasAddressIsRejectedNamingBias) {
  DecodeLinear op = valid_op();
  op.bias = reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(g_host + 48) + 1);
  const Status status = decode_linear(op, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bias"), std::string::npos) << status.to_string();
}

TEST(DecodeLinearArguments, UnalignedWeightIsRejected) {
  DecodeLinear op = valid_op();
  op.weight = reinterpret_cast<const bf16*>(g_host + 1);
  EXPECT_EQ(decode_linear(op, nullptr).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvrt::engine::cuda
