// A hand-built Llama method graph in the layout the frontend produces (docs/graph.md,
// frontend/llama_graph.h): embed_tokens, 17 nodes per layer, final_norm, take_last,
// lm_head. Partitioner and lowering tests use it without a checkpoint.
#pragma once

#include <string>

#include "kvrt/graph/graph.h"

namespace kvrt::testing {

struct TinyLlama {
  int layers = 2;
  int64_t hidden = 8;
  int64_t heads = 2;
  int64_t kv_heads = 1;
  int64_t head_dim = 4;
  int64_t intermediate = 16;
  int64_t vocab = 32;
  int64_t max_seq = 16;
  int64_t max_prompt = 8;
  DType cache_dtype = DType::kF32;
  DType weight_dtype = DType::kBF16;
};

// `prefill`: tokens [1, T] with T in 1..max_prompt; otherwise decode, tokens [1, 1].
inline graph::Graph tiny_llama_graph(const TinyLlama& c, bool prefill) {
  using graph::Dim;
  using graph::ValueId;
  using graph::ValueKind;
  graph::Graph g;
  const Dim t = prefill ? Dim::dynamic("T", 1, c.max_prompt) : Dim::fixed(1);
  auto fixed = [](int64_t size) { return Dim::fixed(size); };
  auto param = [&](const std::string& name, std::vector<Dim> shape) {
    return g.add_value({name, c.weight_dtype, std::move(shape), ValueKind::kParameter});
  };
  auto act = [&](const std::string& name, int64_t width) {
    return g.add_value({name, DType::kF32, {t, fixed(width)}, ValueKind::kIntermediate});
  };
  auto node = [&](const std::string& name, const std::string& op, std::vector<ValueId> inputs,
                  ValueId output, nlohmann::json attributes = nlohmann::json::object()) {
    g.nodes.push_back({name, op, std::move(inputs), {output}, std::move(attributes)});
  };
  const ValueId tokens = g.add_value({"tokens", DType::kI32, {fixed(1), t}, ValueKind::kInput});
  const ValueId position = g.add_value({"position", DType::kI32, {fixed(1)}, ValueKind::kInput});
  g.inputs = {tokens, position};
  const ValueId table = param("model.embed_tokens.weight", {fixed(c.vocab), fixed(c.hidden)});
  ValueId x = act("embed_tokens", c.hidden);
  node("embed_tokens", "embedding", {tokens, table}, x);
  const int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const nlohmann::json rope = {{"theta", 10000.0}, {"scaling", {{"type", "default"}}}};
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    const std::string w = "model.layers." + std::to_string(i) + ".";
    const std::vector<Dim> cache_shape = {fixed(c.kv_heads), fixed(c.max_seq), fixed(c.head_dim)};
    const ValueId k_cache = g.add_value(
        {"k_cache." + std::to_string(i), c.cache_dtype, cache_shape, ValueKind::kBuffer});
    const ValueId v_cache = g.add_value(
        {"v_cache." + std::to_string(i), c.cache_dtype, cache_shape, ValueKind::kBuffer});
    const ValueId normed = act(p + "input_norm", c.hidden);
    node(p + "input_norm", "rms_norm", {x, param(w + "input_layernorm.weight", {fixed(c.hidden)})},
         normed, {{"eps", 1e-5}});
    const ValueId q = act(p + "attn.q_proj", q_width);
    const ValueId k = act(p + "attn.k_proj", kv_width);
    const ValueId v = act(p + "attn.v_proj", kv_width);
    node(p + "attn.q_proj", "linear",
         {normed, param(w + "self_attn.q_proj.weight", {fixed(q_width), fixed(c.hidden)})}, q);
    node(p + "attn.k_proj", "linear",
         {normed, param(w + "self_attn.k_proj.weight", {fixed(kv_width), fixed(c.hidden)})}, k);
    node(p + "attn.v_proj", "linear",
         {normed, param(w + "self_attn.v_proj.weight", {fixed(kv_width), fixed(c.hidden)})}, v);
    const ValueId q_rot = act(p + "attn.q_rope", q_width);
    const ValueId k_rot = act(p + "attn.k_rope", kv_width);
    nlohmann::json q_attr = rope, k_attr = rope;
    q_attr["num_heads"] = c.heads;
    q_attr["head_dim"] = c.head_dim;
    k_attr["num_heads"] = c.kv_heads;
    k_attr["head_dim"] = c.head_dim;
    node(p + "attn.q_rope", "rope", {q, position}, q_rot, q_attr);
    node(p + "attn.k_rope", "rope", {k, position}, k_rot, k_attr);
    const ValueId k_new = g.add_value({"k_cache." + std::to_string(i) + ".updated", c.cache_dtype,
                                       cache_shape, ValueKind::kIntermediate});
    const ValueId v_new = g.add_value({"v_cache." + std::to_string(i) + ".updated", c.cache_dtype,
                                       cache_shape, ValueKind::kIntermediate});
    node(p + "attn.k_cache_write", "kv_cache_write", {k_cache, k_rot, position}, k_new);
    node(p + "attn.v_cache_write", "kv_cache_write", {v_cache, v, position}, v_new);
    g.mutations.push_back({k_cache, k_new});
    g.mutations.push_back({v_cache, v_new});
    const ValueId attended = act(p + "attn.attention", q_width);
    node(p + "attn.attention", "attention", {q_rot, k_new, v_new, position}, attended,
         {{"num_heads", c.heads},
          {"num_kv_heads", c.kv_heads},
          {"head_dim", c.head_dim},
          {"scale", 0.5}});
    const ValueId o = act(p + "attn.o_proj", c.hidden);
    node(p + "attn.o_proj", "linear",
         {attended, param(w + "self_attn.o_proj.weight", {fixed(c.hidden), fixed(q_width)})}, o);
    const ValueId res1 = act(p + "attn.residual", c.hidden);
    node(p + "attn.residual", "add", {x, o}, res1);
    const ValueId post = act(p + "post_attention_norm", c.hidden);
    node(p + "post_attention_norm", "rms_norm",
         {res1, param(w + "post_attention_layernorm.weight", {fixed(c.hidden)})}, post,
         {{"eps", 1e-5}});
    const ValueId gate = act(p + "mlp.gate_proj", c.intermediate);
    const ValueId up = act(p + "mlp.up_proj", c.intermediate);
    node(p + "mlp.gate_proj", "linear",
         {post, param(w + "mlp.gate_proj.weight", {fixed(c.intermediate), fixed(c.hidden)})}, gate);
    node(p + "mlp.up_proj", "linear",
         {post, param(w + "mlp.up_proj.weight", {fixed(c.intermediate), fixed(c.hidden)})}, up);
    const ValueId silu = act(p + "mlp.silu_mul", c.intermediate);
    node(p + "mlp.silu_mul", "silu_mul", {gate, up}, silu);
    const ValueId down = act(p + "mlp.down_proj", c.hidden);
    node(p + "mlp.down_proj", "linear",
         {silu, param(w + "mlp.down_proj.weight", {fixed(c.hidden), fixed(c.intermediate)})}, down);
    const ValueId res2 = act(p + "mlp.residual", c.hidden);
    node(p + "mlp.residual", "add", {res1, down}, res2);
    x = res2;
  }
  const ValueId normed = act("final_norm", c.hidden);
  node("final_norm", "rms_norm", {x, param("model.norm.weight", {fixed(c.hidden)})}, normed,
       {{"eps", 1e-5}});
  const ValueId last = g.add_value(
      {"take_last", DType::kF32, {fixed(1), fixed(c.hidden)}, ValueKind::kIntermediate});
  node("take_last", "take_last", {normed}, last);
  const ValueId logits =
      g.add_value({"logits", DType::kF32, {fixed(1), fixed(c.vocab)}, ValueKind::kIntermediate});
  node("lm_head", "linear", {last, param("lm_head.weight", {fixed(c.vocab), fixed(c.hidden)})},
       logits);
  g.outputs = {logits};
  return g;
}

}  // namespace kvrt::testing
