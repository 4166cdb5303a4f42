// One whole decode step (embedding, every layer, final norm and LM head) built from the
// kernel library, captured in a graph: the kernels in the company they keep in a real
// step, where each one's start overlaps its predecessor's end. Timed in one run: ours
// with PDL (rope fused into decode_attention), ours with rope_kv_write as its own kernel,
// ours with decode_attention reading all of its cache after the PDL wait, and a peer
// step whose linear layers are cuBLASLt GEMMs with separate RMSNorm and SwiGLU kernels
// (attention ours in both). The argmax is left out (it has its own row).
#include "bench_common.h"
#include "lab/lab.h"

namespace kvrt::engine::cuda::bench {
namespace {

// One layer's weights and cache, random: a model of ~2 GB, far past L2, so every step
// reads its weights from HBM as a real one does.
struct Layer {
  Layer(const Model& m, int context, uint32_t seed)
      : attn_norm(static_cast<size_t>(m.hidden) * 2),
        mlp_norm(static_cast<size_t>(m.hidden) * 2),
        qkv(static_cast<size_t>(m.q_heads + 2 * m.kv_heads) * m.head_dim * m.hidden * 2),
        qkv_bias(m.qkv_bias ? static_cast<size_t>(m.q_heads + 2 * m.kv_heads) * m.head_dim * 2 : 0),
        o(static_cast<size_t>(m.hidden) * m.q_heads * m.head_dim * 2),
        gate_up(static_cast<size_t>(2) * m.inter * m.hidden * 2),
        down(static_cast<size_t>(m.hidden) * m.inter * 2),
        k_cache(static_cast<size_t>(m.kv_heads) * context * m.head_dim * 2),
        v_cache(k_cache.bytes) {
    attn_norm.random(1.0f, seed);
    mlp_norm.random(1.0f, seed + 1);
    qkv.random(1.0f / 64, seed + 2);
    if (m.qkv_bias) qkv_bias.random(1.0f, seed + 8);
    o.random(1.0f / 64, seed + 3);
    gate_up.random(1.0f / 64, seed + 4);
    down.random(1.0f / 64, seed + 5);
    k_cache.random(1.0f, seed + 6);
    v_cache.random(1.0f, seed + 7);
  }
  size_t weight_bytes() const {
    return qkv.bytes + qkv_bias.bytes + o.bytes + gate_up.bytes + down.bytes;
  }
  const bf16* bias() const { return qkv_bias.bytes > 0 ? qkv_bias.bf() : nullptr; }
  Buffer attn_norm, mlp_norm, qkv, qkv_bias, o, gate_up, down, k_cache, v_cache;
};

struct Step {
  Step(const Model& m, int context)
      : m(m),
        context(context),
        embed(static_cast<size_t>(m.vocab) * m.hidden * 2),
        final_norm(static_cast<size_t>(m.hidden) * 2),
        lm_head(embed.bytes),
        token(sizeof(int32_t)),
        position(sizeof(int32_t)),
        h(static_cast<size_t>(m.hidden) * 2),
        normed(h.bytes),
        qkv(static_cast<size_t>(m.q_heads + 2 * m.kv_heads) * m.head_dim * 2),
        attn(static_cast<size_t>(m.q_heads) * m.head_dim * 2),
        gate_up(static_cast<size_t>(2) * m.inter * 2),
        act(static_cast<size_t>(m.inter) * 2),
        logits(static_cast<size_t>(m.vocab) * 4) {
    embed.random(1.0f, 11);
    final_norm.random(1.0f, 12);
    lm_head.random(1.0f / 64, 13);
    for (int l = 0; l < m.layers; ++l) {
      layers.push_back(std::make_unique<Layer>(m, context, 100u + 10u * static_cast<uint32_t>(l)));
    }
    const int32_t token_id = 1, pos = context - 1;
    check(cudaMemcpy(token.ptr, &token_id, sizeof(token_id), cudaMemcpyHostToDevice), "token");
    check(cudaMemcpy(position.ptr, &pos, sizeof(pos), cudaMemcpyHostToDevice), "position");
    auto table = rope_inv_freq(m.head_dim, 10000.0f, RopeScaling{});
    check(table.status());
    inv_freq = std::make_unique<Buffer>(table->size() * sizeof(float));
    check(cudaMemcpy(inv_freq->ptr, table->data(), inv_freq->bytes, cudaMemcpyHostToDevice),
          "inv_freq");
    auto chosen = decode_attention_splits(m.q_heads, m.kv_heads, context);
    check(chosen.status());
    splits = *chosen;
    workspace = std::make_unique<Buffer>(  // room for the sweep's split counts
        decode_attention_workspace_bytes(m.q_heads, m.head_dim, 2 * splits));
    workspace->zero();
  }

  // Bytes a step must read: every weight matrix, the live cache, one embedding row.
  double bytes() const {
    double total = static_cast<double>(lm_head.bytes) + 2.0 * m.hidden;
    for (const auto& layer : layers) {
      total += static_cast<double>(layer->weight_bytes()) + 2.0 * layer->k_cache.bytes;
    }
    return total;
  }

  Status rope_and_attention(const Layer& layer, const StepVariant& v, cudaStream_t s) {
    DecodeAttention op;
    op.q = qkv.bf();
    op.k_cache = layer.k_cache.bf();
    op.v_cache = layer.v_cache.bf();
    op.position = static_cast<const int32_t*>(position.ptr);
    op.out = attn.bf();
    op.q_heads = m.q_heads;
    op.kv_heads = m.kv_heads;
    op.head_dim = m.head_dim;
    op.max_seq = context;
    op.splits = v.splits > 0 ? v.splits : splits;
    op.workspace = static_cast<float*>(workspace->ptr);
    op.workspace_bytes = workspace->bytes;
    op.prefetch_history = v.prefetch_history;
    op.next_launch = v.next_launch;
    if (v.fused_rope) {
      op.rope_inv_freq = static_cast<const float*>(inv_freq->ptr);
      return decode_attention(op, s);
    }
    RopeKvWrite rope;
    rope.qkv = qkv.bf();
    rope.positions = static_cast<const int32_t*>(position.ptr);
    rope.inv_freq = static_cast<const float*>(inv_freq->ptr);
    rope.q_heads = m.q_heads;
    rope.kv_heads = m.kv_heads;
    rope.head_dim = m.head_dim;
    rope.k_cache = layer.k_cache.bf();
    rope.v_cache = layer.v_cache.bf();
    rope.max_seq = context;
    KVRT_RETURN_IF_ERROR(rope_kv_write(rope, s));
    return decode_attention(op, s);
  }

  // Ours: the fused decode_linear kernels, attention as `v` says.
  Status ours(const StepVariant& v, cudaStream_t s) {
    KVRT_RETURN_IF_ERROR(embedding_gather(embed.bf(), m.vocab, m.hidden,
                                          static_cast<const int32_t*>(token.ptr), 1, h.bf(), s));
    const int qkv_rows = (m.q_heads + 2 * m.kv_heads) * m.head_dim;
    for (const auto& layer : layers) {
      KVRT_RETURN_IF_ERROR(linear(layer->qkv, h, qkv_rows, m.hidden, &layer->attn_norm, false,
                                  false, qkv, s, layer->bias(), v.qkv));
      if (v.attention) KVRT_RETURN_IF_ERROR(rope_and_attention(*layer, v, s));
      KVRT_RETURN_IF_ERROR(linear(layer->o, attn, m.hidden, m.q_heads * m.head_dim, nullptr, false,
                                  true, h, s, nullptr, v.o_proj));
      KVRT_RETURN_IF_ERROR(linear(layer->gate_up, h, m.inter, m.hidden, &layer->mlp_norm, true,
                                  false, act, s, nullptr, v.gate_up));
      KVRT_RETURN_IF_ERROR(
          linear(layer->down, act, m.hidden, m.inter, nullptr, false, true, h, s, nullptr, v.down));
    }
    DecodeLinear head;
    head.weight = lm_head.bf();
    head.input = h.bf();
    head.rows = m.vocab;
    head.in = m.hidden;
    head.norm_weight = final_norm.bf();
    head.output_f32 = static_cast<float*>(logits.ptr);
    return decode_linear(head, s);
  }

  Status linear(const Buffer& w, const Buffer& x, int rows, int in, const Buffer* norm, bool swiglu,
                bool residual, const Buffer& y, cudaStream_t s, const bf16* bias = nullptr,
                const DecodeLinearTuning& tuning = {}) {
    DecodeLinear op;
    op.weight = w.bf();
    op.input = x.bf();
    op.rows = rows;
    op.in = in;
    op.norm_weight = norm != nullptr ? norm->bf() : nullptr;
    op.swiglu = swiglu;
    op.bias = bias;
    op.residual = residual ? y.bf() : nullptr;
    op.output = y.bf();
    op.tuning = tuning;
    return decode_linear(op, s);
  }

  // The peer: cuBLASLt GEMMs, RMSNorm and SwiGLU as their own kernels.
  Status peer(PrefillLinear& lt, cudaStream_t s) {
    constexpr float kEps = 1e-5f;
    KVRT_RETURN_IF_ERROR(embedding_gather(embed.bf(), m.vocab, m.hidden,
                                          static_cast<const int32_t*>(token.ptr), 1, h.bf(), s));
    const int qkv_rows = (m.q_heads + 2 * m.kv_heads) * m.head_dim;
    for (const auto& layer : layers) {
      KVRT_RETURN_IF_ERROR(
          rmsnorm(h.bf(), layer->attn_norm.bf(), normed.bf(), 1, m.hidden, kEps, s));
      KVRT_RETURN_IF_ERROR(lt.run(layer->qkv.bf(), normed.bf(), 1, qkv_rows, m.hidden, nullptr,
                                  qkv.bf(), s, layer->bias()));
      KVRT_RETURN_IF_ERROR(rope_and_attention(*layer, StepVariant{}, s));
      KVRT_RETURN_IF_ERROR(
          lt.run(layer->o.bf(), attn.bf(), 1, m.hidden, m.q_heads * m.head_dim, h.bf(), h.bf(), s));
      KVRT_RETURN_IF_ERROR(
          rmsnorm(h.bf(), layer->mlp_norm.bf(), normed.bf(), 1, m.hidden, kEps, s));
      KVRT_RETURN_IF_ERROR(lt.run(layer->gate_up.bf(), normed.bf(), 1, 2 * m.inter, m.hidden,
                                  nullptr, gate_up.bf(), s));
      KVRT_RETURN_IF_ERROR(swiglu(gate_up.bf(), act.bf(), 1, m.inter, s));
      KVRT_RETURN_IF_ERROR(
          lt.run(layer->down.bf(), act.bf(), 1, m.hidden, m.inter, h.bf(), h.bf(), s));
    }
    KVRT_RETURN_IF_ERROR(rmsnorm(h.bf(), final_norm.bf(), normed.bf(), 1, m.hidden, kEps, s));
    // bf16 logits here (cuBLASLt's output type in this library): 4x fewer bytes written
    // than ours, in the peer's favour.
    return lt.run(lm_head.bf(), normed.bf(), 1, m.vocab, m.hidden, nullptr,
                  static_cast<bf16*>(logits.ptr), s);
  }

  const Model& m;
  int context;
  Buffer embed, final_norm, lm_head, token, position, h, normed, qkv, attn, gate_up, act, logits;
  std::vector<std::unique_ptr<Layer>> layers;
  std::unique_ptr<Buffer> inv_freq, workspace;
  int splits = 0;
};

}  // namespace

void bench_decode_step(Timer& timer, Report& report, Sweep& sweep, PrefillLinear& lt,
                       const Model& m, int context) {
  Step step(m, context);
  constexpr int kSteps = 2;  // per graph: the model is far past L2 already
  auto time = [&](const StepVariant& v) {
    return timer.time([&](int, cudaStream_t s) { return step.ours(v, s); }, kSteps);
  };
  const auto ours =
      timer.ours([&](int, cudaStream_t s) { return step.ours(StepVariant{}, s); }, kSteps);
  StepVariant separate_rope, late_history;
  separate_rope.fused_rope = false;
  late_history.prefetch_history = false;
  const LaunchTime separate_rope_us = time(separate_rope);
  const LaunchTime late_history_us = time(late_history);
  set_programmatic_launch(false);
  const double peer =
      timer.per_launch_us([&](int, cudaStream_t s) { return step.peer(lt, s); }, kSteps);
  set_programmatic_launch(true);
  auto row = [&](const char* kernel, const OursTime& us) {
    char shape[160];
    std::snprintf(shape, sizeof(shape), "%d layers, cache %d: %.0f tokens/s", m.layers, context,
                  1e6 / us.pdl.chain);
    report.bandwidth(m.name, kernel, shape, step.bytes(), us, peer);
  };
  row("decode step (embedding to logits)", ours);
  row("decode step, rope as its own kernel", {separate_rope_us, ours.plain});
  row("decode step, attention history read after the PDL wait", {late_history_us, ours.plain});
  if (!sweep.enabled) return;
  char name[64];
  std::snprintf(name, sizeof(name), "%s decode step, cache %d", m.name, context);
  sweep_decode_step(sweep, name, step.bytes(), step.splits,
                    [&](const StepVariant& v) { return time(v).chain; });
}

}  // namespace kvrt::engine::cuda::bench
