// prefill_attention (causal, FlashAttention-2 on tensor cores) against the CPU
// reference: head_dim 64/80/128, GQA ratios 1/4/8, token counts that leave partial
// query and key tiles, chunked prefill after earlier tokens (start > 0), q read with
// the fused qkv row stride, and NaN in every cache row past the last position.
//
// Tolerances: as decode_attention_test.cpp (P rounded to bf16 before P·V, output a
// convex combination of |v| <= 1 rows, one final bf16 rounding): atol = rtol = 2^-8.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using testing::to_float;

struct PrefillCase {
  int head_dim;
  int group;
  int tokens;
  int start;              // position of the first token; rows [0, start) are earlier context
  bool shuffled = false;  // positions in a scrambled order
};

class PrefillAttentionTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillAttentionTest, MatchesCpuReference) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const PrefillCase c = GetParam();
  const int kv_heads = 2, q_heads = kv_heads * c.group, dim = c.head_dim;
  const int max_seq = c.start + c.tokens + 70;
  const int width = (q_heads + 2 * kv_heads) * dim;  // the fused qkv row
  std::mt19937 rng(static_cast<uint32_t>(dim * 7 + c.group * 131 + c.tokens + c.start));

  std::vector<int32_t> positions(static_cast<size_t>(c.tokens));
  std::iota(positions.begin(), positions.end(), c.start);
  if (c.shuffled) std::shuffle(positions.begin(), positions.end(), rng);
  const auto qkv = random_bf16(static_cast<size_t>(c.tokens) * width, -2.0f, 2.0f, rng);
  auto k = random_bf16(static_cast<size_t>(kv_heads) * max_seq * dim, -2.0f, 2.0f, rng);
  auto v = random_bf16(k.size(), -1.0f, 1.0f, rng);
  const int live = c.start + c.tokens;
  for (int h = 0; h < kv_heads; ++h) {
    for (size_t i = (static_cast<size_t>(h) * max_seq + live) * dim;
         i < static_cast<size_t>(h + 1) * max_seq * dim; ++i) {
      k[i] = v[i] = 0x7fc0;  // NaN
    }
  }
  DeviceBuffer<uint16_t> d_qkv(qkv), d_k(k), d_v(v);
  DeviceBuffer<uint16_t> d_out(static_cast<size_t>(c.tokens) * q_heads * dim);
  DeviceBuffer<int32_t> d_pos(positions);
  d_out.poison();

  PrefillAttention op;
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
  KVRT_ASSERT_OK(prefill_attention(op, nullptr));
  testing::sync_device();

  const auto qkv_f = to_float(qkv);
  std::vector<float> q(static_cast<size_t>(c.tokens) * q_heads * dim);
  for (int t = 0; t < c.tokens; ++t) {
    std::copy_n(qkv_f.begin() + static_cast<ptrdiff_t>(t) * width, q_heads * dim,
                q.begin() + static_cast<ptrdiff_t>(t) * q_heads * dim);
  }
  const std::vector<int> ref_positions(positions.begin(), positions.end());
  const auto ref =
      reference::attention(q, to_float(k), to_float(v), ref_positions, q_heads, kv_heads, dim,
                           max_seq, 1.0f / std::sqrt(static_cast<float>(dim)));
  EXPECT_TRUE(testing::all_close(to_float(d_out.download()), ref, {1.0 / 256, 1.0 / 256, 1e-2}));
}

std::vector<PrefillCase> prefill_cases() {
  std::vector<PrefillCase> cases;
  const PrefillCase spans[] = {{0, 0, 1, 0}, {0, 0, 67, 0}, {0, 0, 300, 37}};
  for (int dim : {64, 80, 128}) {
    for (int group : {1, 4, 8}) {
      for (const PrefillCase& span : spans) cases.push_back({dim, group, span.tokens, span.start});
    }
  }
  cases.push_back({96, 4, 129, 5});
  // Group sizes of larger models: Llama-3.2-3B (3), Qwen2.5-1.5B (6), Qwen2.5-0.5B (7).
  cases.push_back({128, 3, 67, 0});
  cases.push_back({128, 6, 300, 37});
  cases.push_back({64, 7, 129, 5});
  cases.push_back({64, 4, 100, 30, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillAttentionTest, ::testing::ValuesIn(prefill_cases()),
                         [](const ::testing::TestParamInfo<PrefillCase>& info) {
                           const PrefillCase& c = info.param;
                           return testing::param_name("d", c.head_dim, "_g", c.group, "_t",
                                                      c.tokens, "_start", c.start,
                                                      c.shuffled ? "_shuffled" : "");
                         });

}  // namespace
}  // namespace kvrt::engine::cuda
