// decode_attention (split-K flash-decoding) against the CPU reference: head_dim 64/80/
// 128, GQA ratios 1/4/8 (and 32: two 16-head groups per kv head), cache lengths 1, 257
// and 4096, with the history prefetched before the PDL wait and without, and grids whose
// steps pick their own split count (min_splits) on either side of 4096 keys. Cache rows past the
// query's position hold NaN: they must never be read into the result.
//
// Tolerances: P is rounded to bf16 before P·V (FlashAttention-2 does the same), a
// relative error <= 2^-9 per weight; the output is a convex combination of V rows
// (|v| <= 1 here), so the error stays below 2^-9 * max|v| plus the final bf16 rounding
// of the output (2^-9 relative): atol = 2^-8, rtol = 2^-8, relative L2 <= 1e-2.
#include <algorithm>
#include <cmath>

#include "kvrt/engine/cuda/test/reference.h"
#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using testing::to_float;

struct DecodeCase {
  int head_dim;
  int group;  // q_heads / kv_heads
  int length;
  int splits;  // 0: decode_attention_splits()
  bool prefetch_history = true;
  int min_splits = 0;  // > 0: `splits` is the grid, the step picks between the two
};

// Runs decode steps at positions length - 1, then (when `calls` > 1) shorter ones, all
// on one workspace, and checks each against the reference. The output is poisoned
// before every call, so a completion counter not returned to zero (the merge never
// runs, or runs early) shows as NaN.
void check_decode(const DecodeCase& c, int calls = 1) {
  const int kv_heads = 2, q_heads = kv_heads * c.group, dim = c.head_dim;
  const int max_seq = c.length + 100;
  std::mt19937 rng(static_cast<uint32_t>(dim * 1000 + c.group * 10 + c.length));
  const auto q = random_bf16(static_cast<size_t>(q_heads) * dim, -2.0f, 2.0f, rng);
  auto k = random_bf16(static_cast<size_t>(kv_heads) * max_seq * dim, -2.0f, 2.0f, rng);
  auto v = random_bf16(k.size(), -1.0f, 1.0f, rng);
  for (int h = 0; h < kv_heads; ++h) {  // poison the rows past the live cache
    for (size_t i = (static_cast<size_t>(h) * max_seq + c.length) * dim;
         i < static_cast<size_t>(h + 1) * max_seq * dim; ++i) {
      k[i] = v[i] = 0x7fc0;  // NaN
    }
  }
  DeviceBuffer<uint16_t> d_q(q), d_k(k), d_v(v), d_out(q.size());

  int splits = c.splits;
  if (splits == 0) {
    auto chosen = decode_attention_splits(q_heads, kv_heads, max_seq);
    KVRT_ASSERT_OK(chosen.status());
    splits = *chosen;
  }
  const size_t workspace_bytes = decode_attention_workspace_bytes(q_heads, dim, splits);
  DeviceBuffer<float> d_workspace(workspace_bytes / sizeof(float));
  d_workspace.poison();  // stale partials must not leak into the result
  d_workspace.zero(decode_attention_counter_bytes(q_heads));

  for (int call = 0; call < calls; ++call) {
    // Later calls look at a shorter prefix: rows past it are live data, not NaN.
    const int length = call == 0 ? c.length : std::max(1, c.length / (2 * call) - call);
    DeviceBuffer<int32_t> d_pos(std::vector<int32_t>{length - 1});
    d_out.poison();
    DecodeAttention op;
    op.q = d_q.as_bf16();
    op.k_cache = d_k.as_bf16();
    op.v_cache = d_v.as_bf16();
    op.position = d_pos.get();
    op.out = d_out.as_bf16();
    op.q_heads = q_heads;
    op.kv_heads = kv_heads;
    op.head_dim = dim;
    op.max_seq = max_seq;
    op.splits = splits;
    op.min_splits = c.min_splits;
    op.workspace = d_workspace.get();
    op.workspace_bytes = workspace_bytes;
    op.prefetch_history = c.prefetch_history;
    KVRT_ASSERT_OK(decode_attention(op, nullptr));
    testing::sync_device();

    const auto ref =
        reference::attention(to_float(q), to_float(k), to_float(v), {length - 1}, q_heads, kv_heads,
                             dim, max_seq, 1.0f / std::sqrt(static_cast<float>(dim)));
    EXPECT_TRUE(testing::all_close(to_float(d_out.download()), ref, {1.0 / 256, 1.0 / 256, 1e-2}))
        << "splits = " << splits << ", call " << call << ", length " << length;
  }
}

TEST(DecodeAttentionWorkspace, CountersReturnToZeroBetweenCalls) {
  KVRT_REQUIRE_CUDA_DEVICE();
  check_decode({64, 8, 4096, 0}, 4);
  check_decode({128, 4, 1000, 7}, 3);
  // Each call picks its own split count (32, then 16 on the shorter prefixes): the
  // counters must wrap at each call's count.
  check_decode({64, 8, 8000, 32, true, 16}, 4);
}

// The grid's splits extend the policy's only where the one-pass geometry runs and the
// larger grid stays one wave; never past what max_seq can use.
TEST(DecodeAttentionSplits, MaxSplitsExtendOnlyWhereTheyHelp) {
  KVRT_REQUIRE_CUDA_DEVICE();
  auto tiny = decode_attention_max_splits(32, 4, 64, 8192, 16);  // TinyLlama
  KVRT_ASSERT_OK(tiny.status());
  EXPECT_EQ(*tiny, 32);
  auto short_cache = decode_attention_max_splits(32, 4, 64, 4096, 16);
  KVRT_ASSERT_OK(short_cache.status());
  EXPECT_EQ(*short_cache, 16);  // 16 slices of 256 keys hold the whole cache
  auto dim96 = decode_attention_max_splits(32, 8, 96, 8192, 16);
  KVRT_ASSERT_OK(dim96.status());
  EXPECT_EQ(*dim96, 16);  // the 4-warp geometry has no one-pass path
  auto wide_grid = decode_attention_max_splits(32, 8, 128, 8192, 16);  // Llama-3.1-8B
  KVRT_ASSERT_OK(wide_grid.status());
  EXPECT_EQ(*wide_grid, 16);  // 256 blocks of 8 warps at head_dim 128: not one wave
  EXPECT_FALSE(decode_attention_max_splits(32, 5, 64, 8192, 16).ok());
}

class DecodeAttentionTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeAttentionTest, MatchesCpuReference) {
  KVRT_REQUIRE_CUDA_DEVICE();
  check_decode(GetParam());
}

std::vector<DecodeCase> decode_cases() {
  std::vector<DecodeCase> cases;
  for (int dim : {64, 80, 128}) {
    for (int group : {1, 4, 8}) {
      for (int length : {1, 257, 4096}) cases.push_back({dim, group, length, 0});
    }
  }
  cases.push_back({64, 32, 257, 0});  // two head groups per kv head
  cases.push_back({96, 4, 1000, 0});
  // Group sizes of larger models: Llama-3.2-3B (3), Qwen2.5-1.5B (6), Qwen2.5-0.5B (7).
  cases.push_back({128, 3, 4096, 0});
  cases.push_back({128, 6, 4096, 0});
  cases.push_back({64, 7, 4096, 0});
  // Fixed split counts: one split (no merge), and more splits than tiles (empty ones).
  cases.push_back({128, 8, 4096, 1});
  cases.push_back({64, 4, 257, 7});
  cases.push_back({64, 4, 100, 64});
  cases.push_back({64, 8, 32768, 0});  // a long cache: many tiles per block
  cases.push_back({80, 1, 4096, 512});
  cases.push_back({64, 16, 4096, 512});  // the largest merge: 16 heads x 512 splits
  // The last block's merge over three 16-split batches, the last one partial.
  cases.push_back({64, 8, 4096, 40});
  // head_dim 128 on 4 warps: a grid (2 kv heads x 100 splits) past one wave of the 8-warp
  // blocks, one per multiprocessor.
  cases.push_back({128, 4, 4096, 100});
  // The last slice holds only the new row (no history tile): slices [0, 16), [16, 17).
  cases.push_back({64, 4, 17, 2});
  cases.push_back({128, 8, 65, 5});
  // A grid of 32 splits of which each step uses 16 up to 4096 keys, then as many as keep
  // 256-key slices (4097 keys: 17, the last holding one key; 5000: 20), then 16 again.
  cases.push_back({64, 8, 4097, 32, true, 16});
  cases.push_back({64, 4, 5000, 32, true, 16});
  cases.push_back({80, 4, 4500, 32, true, 16});
  cases.push_back({128, 8, 4224, 32, true, 16});
  cases.push_back({64, 8, 9000, 32, true, 16});
  cases.push_back({64, 4, 4097, 32, false, 16});
  // Everything read after the PDL wait.
  cases.push_back({64, 8, 4096, 0, false});
  cases.push_back({80, 4, 257, 0, false});
  cases.push_back({128, 1, 1, 0, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionTest, ::testing::ValuesIn(decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) {
                           const DecodeCase& c = info.param;
                           return testing::param_name(
                               "d", c.head_dim, "_g", c.group, "_len", c.length,
                               c.splits > 0 ? testing::param_name("_splits", c.splits) : "",
                               c.min_splits > 0 ? testing::param_name("_min", c.min_splits) : "",
                               c.prefetch_history ? "" : "_no_prefetch");
                         });

// Rope fused into decode_attention must give the bits of rope_kv_write followed by
// decode_attention: the same output, the same cache (the new row written once per kv
// head, even with two head groups per kv head), and the qkv row left unrotated. Both
// halves are checked against the CPU reference by their own tests.
struct FusedRopeCase {
  int head_dim, group, length;
};

class DecodeAttentionFusedRope : public ::testing::TestWithParam<FusedRopeCase> {};

TEST_P(DecodeAttentionFusedRope, MatchesRopeKvWriteThenAttention) {
  KVRT_REQUIRE_CUDA_DEVICE();
  const FusedRopeCase c = GetParam();
  const int kv_heads = 2, q_heads = kv_heads * c.group, dim = c.head_dim;
  const int max_seq = c.length + 40, pos = c.length - 1;
  std::mt19937 rng(static_cast<uint32_t>(7 * dim + c.group + c.length));
  const auto qkv = random_bf16(static_cast<size_t>(q_heads + 2 * kv_heads) * dim, -2.0f, 2.0f, rng);
  auto k = random_bf16(static_cast<size_t>(kv_heads) * max_seq * dim, -2.0f, 2.0f, rng);
  auto v = random_bf16(k.size(), -1.0f, 1.0f, rng);
  for (int h = 0; h < kv_heads; ++h) {  // the position's row and beyond: NaN until written
    for (size_t i = (static_cast<size_t>(h) * max_seq + pos) * dim;
         i < static_cast<size_t>(h + 1) * max_seq * dim; ++i) {
      k[i] = v[i] = 0x7fc0;
    }
  }
  auto table = rope_inv_freq(dim, 500000.0f, RopeScaling{RopeType::kLlama3});
  KVRT_ASSERT_OK(table.status());
  DeviceBuffer<float> inv_freq(*table);
  DeviceBuffer<int32_t> d_pos(std::vector<int32_t>{pos});
  auto splits = decode_attention_splits(q_heads, kv_heads, max_seq);
  KVRT_ASSERT_OK(splits.status());
  const size_t workspace_bytes = decode_attention_workspace_bytes(q_heads, dim, *splits);

  struct Run {
    explicit Run(const std::vector<uint16_t>& qkv, const std::vector<uint16_t>& k,
                 const std::vector<uint16_t>& v, size_t out, size_t workspace)
        : qkv(qkv), k(k), v(v), out(out), workspace(workspace / sizeof(float)) {
      this->workspace.zero();
    }
    DeviceBuffer<uint16_t> qkv, k, v, out;
    DeviceBuffer<float> workspace;
  };
  Run separate(qkv, k, v, static_cast<size_t>(q_heads) * dim, workspace_bytes);
  Run fused(qkv, k, v, static_cast<size_t>(q_heads) * dim, workspace_bytes);
  auto attention_op = [&](Run& run) {
    DecodeAttention op;
    op.q = run.qkv.as_bf16();
    op.k_cache = run.k.as_bf16();
    op.v_cache = run.v.as_bf16();
    op.position = d_pos.get();
    op.out = run.out.as_bf16();
    op.q_heads = q_heads;
    op.kv_heads = kv_heads;
    op.head_dim = dim;
    op.max_seq = max_seq;
    op.splits = *splits;
    op.workspace = run.workspace.get();
    op.workspace_bytes = workspace_bytes;
    return op;
  };

  RopeKvWrite rope;
  rope.qkv = separate.qkv.as_bf16();
  rope.positions = d_pos.get();
  rope.inv_freq = inv_freq.get();
  rope.q_heads = q_heads;
  rope.kv_heads = kv_heads;
  rope.head_dim = dim;
  rope.k_cache = separate.k.as_bf16();
  rope.v_cache = separate.v.as_bf16();
  rope.max_seq = max_seq;
  KVRT_ASSERT_OK(rope_kv_write(rope, nullptr));
  KVRT_ASSERT_OK(decode_attention(attention_op(separate), nullptr));

  DecodeAttention op = attention_op(fused);
  op.rope_inv_freq = inv_freq.get();
  KVRT_ASSERT_OK(decode_attention(op, nullptr));
  testing::sync_device();

  EXPECT_TRUE(fused.out.download() == separate.out.download()) << "attention output differs";
  EXPECT_TRUE(fused.k.download() == separate.k.download()) << "K cache differs";
  EXPECT_TRUE(fused.v.download() == separate.v.download()) << "V cache differs";
  EXPECT_TRUE(fused.qkv.download() == qkv) << "the qkv row was modified";
  const auto out = to_float(fused.out.download());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }));
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionFusedRope,
                         ::testing::Values(FusedRopeCase{64, 8, 4096}, FusedRopeCase{64, 32, 300},
                                           FusedRopeCase{128, 4, 1}, FusedRopeCase{80, 1, 257},
                                           FusedRopeCase{96, 4, 1000}),
                         [](const ::testing::TestParamInfo<FusedRopeCase>& info) {
                           const FusedRopeCase& c = info.param;
                           return testing::param_name("d", c.head_dim, "_g", c.group, "_len",
                                                      c.length);
                         });

// Argument checks happen before any device work, so they run without a GPU too. A
// valid-looking op over host memory, for each test to break one way.
DecodeAttention host_op() {
  alignas(16) static uint16_t host[256];  // room for the workspace of one head, one split
  DecodeAttention op;
  op.q = reinterpret_cast<const bf16*>(host);
  op.k_cache = op.v_cache = reinterpret_cast<bf16*>(host);
  op.out = reinterpret_cast<bf16*>(host);
  op.position = reinterpret_cast<const int32_t*>(host);
  op.workspace = reinterpret_cast<float*>(host);
  op.workspace_bytes = sizeof(host);
  op.q_heads = op.kv_heads = 1;
  op.head_dim = 64;
  op.max_seq = 4;
  op.splits = 1;
  return op;
}

TEST(DecodeAttentionArguments, UnsupportedHeadDimIsRejected) {
  DecodeAttention op = host_op();
  op.head_dim = 72;
  EXPECT_EQ(decode_attention(op, nullptr).code(), ErrorCode::kNotSupported);
}

TEST(DecodeAttentionArguments, GroupThatDoesNotDivideIsRejected) {
  DecodeAttention op = host_op();
  op.q_heads = 6;
  op.kv_heads = 4;
  EXPECT_EQ(decode_attention(op, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(DecodeAttentionArguments, MisalignedOutputIsRejectedNamingOut) {
  DecodeAttention op = host_op();
  op.out += 1;  // 2-byte aligned: the split merge's 8-byte stores would fault
  const Status status = decode_attention(op, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("out must be 8-byte aligned"), std::string::npos)
      << status.to_string();
}

TEST(DecodeAttentionArguments, TooManySplitsAreRejected) {
  DecodeAttention op = host_op();
  op.max_seq = 4096;
  op.splits = 513;
  EXPECT_EQ(decode_attention(op, nullptr).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvrt::engine::cuda
