// A whole decode step of a tiny Llama (embedding -> norm+qkv -> rope/cache write ->
// split-K attention -> o_proj+residual -> norm+gate/up+SwiGLU -> down+residual ->
// norm+LM head+argmax) captured once in a CUDA graph and replayed for 24 positions,
// with the argmax writing the next token id where the embedding reads it and only the
// position written by the host between replays. It must match the same steps run
// eagerly launch by launch, bit for bit, with programmatic dependent launch on for the
// graph and off for the eager run. The graph runs with decode_attention letting the next
// kernel launch early and late (its cache prefetch ahead of the PDL wait must see the
// same data either way), and with rope fused into decode_attention or as rope_kv_write
// (the eager run always uses rope_kv_write: the fused rope must give the same bits).
#include <cmath>

#include "kvrt/engine/cuda/test/test_util.h"

namespace kvrt::engine::cuda {
namespace {

using testing::check_cuda;
using testing::DeviceBuffer;
using testing::random_bf16;

constexpr int kHidden = 256, kQHeads = 4, kKvHeads = 2, kDim = 64, kVocab = 1000;
constexpr int kInter = 512, kMaxSeq = 64, kSteps = 24;
constexpr int kQkvRows = (kQHeads + 2 * kKvHeads) * kDim;

struct Weights {
  explicit Weights(std::mt19937& rng)
      : embed(random_bf16(kVocab * kHidden, -1.0f, 1.0f, rng)),
        attn_norm(random_bf16(kHidden, 0.5f, 1.5f, rng)),
        qkv(random_bf16(kQkvRows * kHidden, -0.0625f, 0.0625f, rng)),
        o(random_bf16(kHidden * kQHeads * kDim, -0.0625f, 0.0625f, rng)),
        mlp_norm(random_bf16(kHidden, 0.5f, 1.5f, rng)),
        gate_up(random_bf16(2 * kInter * kHidden, -0.0625f, 0.0625f, rng)),
        down(random_bf16(kHidden * kInter, -0.044f, 0.044f, rng)),
        final_norm(random_bf16(kHidden, 0.5f, 1.5f, rng)),
        lm_head(random_bf16(kVocab * kHidden, -0.0625f, 0.0625f, rng)) {}
  DeviceBuffer<uint16_t> embed, attn_norm, qkv, o, mlp_norm, gate_up, down, final_norm, lm_head;
};

// The activations, cache and workspaces of one decode "session".
struct Session {
  explicit Session(int splits)
      : token(std::vector<int32_t>{1}),
        position(1),
        h(kHidden),
        qkv(kQkvRows),
        attn(kQHeads * kDim),
        act(kInter),
        logits(kVocab),
        k_cache(static_cast<size_t>(kKvHeads) * kMaxSeq * kDim),
        v_cache(static_cast<size_t>(kKvHeads) * kMaxSeq * kDim),
        attn_workspace(decode_attention_workspace_bytes(kQHeads, kDim, splits) / sizeof(float)),
        argmax_workspace(kDecodeLinearArgmaxWorkspaceBytes),
        splits(splits) {
    attn_workspace.zero(decode_attention_counter_bytes(kQHeads));
    argmax_workspace.zero();
  }
  DeviceBuffer<int32_t> token, position;
  DeviceBuffer<uint16_t> h, qkv, attn, act;
  DeviceBuffer<float> logits;
  DeviceBuffer<uint16_t> k_cache, v_cache;
  DeviceBuffer<float> attn_workspace;
  DeviceBuffer<uint8_t> argmax_workspace;
  int splits;
};

// With `fused_rope`, decode_attention rotates and writes the cache row itself; `next_launch`
// is decode_attention's.
Status decode_step(const Weights& w, Session& s, const float* inv_freq, bool fused_rope,
                   DependentLaunch next_launch, cudaStream_t stream) {
  KVRT_RETURN_IF_ERROR(embedding_gather(w.embed.as_bf16(), kVocab, kHidden, s.token.get(), 1,
                                        s.h.as_bf16(), stream));
  DecodeLinear qkv;
  qkv.weight = w.qkv.as_bf16();
  qkv.input = s.h.as_bf16();
  qkv.rows = kQkvRows;
  qkv.in = kHidden;
  qkv.norm_weight = w.attn_norm.as_bf16();
  qkv.output = s.qkv.as_bf16();
  KVRT_RETURN_IF_ERROR(decode_linear(qkv, stream));

  RopeKvWrite rope;
  rope.qkv = s.qkv.as_bf16();
  rope.positions = s.position.get();
  rope.inv_freq = inv_freq;
  rope.q_heads = kQHeads;
  rope.kv_heads = kKvHeads;
  rope.head_dim = kDim;
  rope.k_cache = s.k_cache.as_bf16();
  rope.v_cache = s.v_cache.as_bf16();
  rope.max_seq = kMaxSeq;
  if (!fused_rope) KVRT_RETURN_IF_ERROR(rope_kv_write(rope, stream));

  DecodeAttention attention;
  attention.q = s.qkv.as_bf16();
  attention.k_cache = s.k_cache.as_bf16();
  attention.v_cache = s.v_cache.as_bf16();
  attention.position = s.position.get();
  attention.out = s.attn.as_bf16();
  attention.q_heads = kQHeads;
  attention.kv_heads = kKvHeads;
  attention.head_dim = kDim;
  attention.max_seq = kMaxSeq;
  attention.splits = s.splits;
  attention.workspace = s.attn_workspace.get();
  attention.workspace_bytes = s.attn_workspace.bytes();
  if (fused_rope) attention.rope_inv_freq = inv_freq;
  attention.next_launch = next_launch;
  KVRT_RETURN_IF_ERROR(decode_attention(attention, stream));

  DecodeLinear o;
  o.weight = w.o.as_bf16();
  o.input = s.attn.as_bf16();
  o.rows = kHidden;
  o.in = kQHeads * kDim;
  o.residual = s.h.as_bf16();
  o.output = s.h.as_bf16();
  KVRT_RETURN_IF_ERROR(decode_linear(o, stream));

  DecodeLinear gate_up;
  gate_up.weight = w.gate_up.as_bf16();
  gate_up.input = s.h.as_bf16();
  gate_up.rows = kInter;
  gate_up.in = kHidden;
  gate_up.norm_weight = w.mlp_norm.as_bf16();
  gate_up.swiglu = true;
  gate_up.output = s.act.as_bf16();
  KVRT_RETURN_IF_ERROR(decode_linear(gate_up, stream));

  DecodeLinear down;
  down.weight = w.down.as_bf16();
  down.input = s.act.as_bf16();
  down.rows = kHidden;
  down.in = kInter;
  down.residual = s.h.as_bf16();
  down.output = s.h.as_bf16();
  KVRT_RETURN_IF_ERROR(decode_linear(down, stream));

  DecodeLinear head;
  head.weight = w.lm_head.as_bf16();
  head.input = s.h.as_bf16();
  head.rows = kVocab;
  head.in = kHidden;
  head.norm_weight = w.final_norm.as_bf16();
  head.output_f32 = s.logits.get();
  head.argmax_out = s.token.get();
  head.argmax_workspace = s.argmax_workspace.get();
  return decode_linear(head, stream);
}

// Restores the process-wide PDL setting when the test ends.
class ProgrammaticLaunchGuard {
 public:
  ProgrammaticLaunchGuard() : saved_(programmatic_launch()) {}
  ~ProgrammaticLaunchGuard() { set_programmatic_launch(saved_); }

 private:
  bool saved_;
};

struct GraphCase {
  DependentLaunch next_launch;
  bool fused_rope;  // in the graph; the eager run always launches rope_kv_write
};

class DecodeGraphTest : public ::testing::TestWithParam<GraphCase> {};

TEST_P(DecodeGraphTest, GraphReplayReadsPositionAndTokenFromDevice) {
  KVRT_REQUIRE_CUDA_DEVICE();
  ProgrammaticLaunchGuard guard;
  const DependentLaunch next_launch = GetParam().next_launch;
  std::mt19937 rng(2024);
  const Weights weights(rng);
  auto table = rope_inv_freq(kDim, 10000.0f, RopeScaling{});
  KVRT_ASSERT_OK(table.status());
  DeviceBuffer<float> inv_freq(*table);
  auto splits = decode_attention_splits(kQHeads, kKvHeads, kMaxSeq);
  KVRT_ASSERT_OK(splits.status());

  // Eager, one launch after another, no PDL.
  set_programmatic_launch(false);
  Session eager(*splits);
  std::vector<int32_t> eager_tokens;
  std::vector<std::vector<float>> eager_logits;
  for (int pos = 0; pos < kSteps; ++pos) {
    eager.position.upload({pos});
    KVRT_ASSERT_OK(decode_step(weights, eager, inv_freq.get(), false, next_launch, nullptr));
    testing::sync_device();
    eager_tokens.push_back(eager.token.download()[0]);
    eager_logits.push_back(eager.logits.download());
  }
  ASSERT_NE(eager_logits[0], eager_logits[1]) << "the cache update did not change the logits";

  // Captured once, with PDL, replayed with only the position rewritten by the host.
  set_programmatic_launch(true);
  Session graphed(*splits);
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaGraph_t graph = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  const Status captured =
      decode_step(weights, graphed, inv_freq.get(), GetParam().fused_rope, next_launch, stream);
  check_cuda(cudaStreamEndCapture(stream, &graph), "end capture");
  KVRT_ASSERT_OK(captured);
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int pos = 0; pos < kSteps; ++pos) {
    check_cuda(
        cudaMemcpyAsync(graphed.position.get(), &pos, sizeof(pos), cudaMemcpyHostToDevice, stream),
        "position");
    check_cuda(cudaGraphLaunch(exec, stream), "graph launch");
    check_cuda(cudaStreamSynchronize(stream), "sync");
    EXPECT_EQ(graphed.token.download()[0], eager_tokens[static_cast<size_t>(pos)])
        << "position " << pos;
    EXPECT_TRUE(graphed.logits.download() == eager_logits[static_cast<size_t>(pos)])
        << "logits differ at position " << pos;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Attention, DecodeGraphTest,
                         ::testing::Values(GraphCase{DependentLaunch::kEarly, false},
                                           GraphCase{DependentLaunch::kLate, false},
                                           GraphCase{DependentLaunch::kEarly, true},
                                           GraphCase{DependentLaunch::kLate, true}),
                         [](const ::testing::TestParamInfo<GraphCase>& info) {
                           return std::string(info.param.next_launch == DependentLaunch::kEarly
                                                  ? "Early"
                                                  : "Late") +
                                  (info.param.fused_rope ? "FusedRope" : "RopeKernel");
                         });

}  // namespace
}  // namespace kvrt::engine::cuda
