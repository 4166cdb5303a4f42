#include "kvrt/engine/cuda/decoder_plan.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "kvrt/engine/cpu/ops.h"

namespace kvrt::engine::cuda {
namespace {

using graph::ValueId;
using graph::ValueKind;

bool is_weight_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

class Matcher {
 public:
  explicit Matcher(const graph::Graph& graph) : g_(graph), consumers_(graph.values.size()) {
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      for (ValueId v : g_.nodes[n].inputs) consumers_[static_cast<size_t>(v)].push_back(n);
    }
    matched_.assign(g_.nodes.size(), false);
  }

  Result<DecoderPlan> run();

 private:
  const graph::Value& value(ValueId id) const { return g_.values[static_cast<size_t>(id)]; }
  const std::vector<size_t>& consumers(ValueId id) const {
    return consumers_[static_cast<size_t>(id)];
  }
  Status refuse(const graph::Node& node, const std::string& why) const {
    return not_supported("node '", node.name, "' (", node.op,
                         "): the CUDA engine runs the Llama/Qwen2 decoder pattern; ", why);
  }

  // The nodes reading `id` whose op is `op` (not yet matched).
  std::vector<size_t> consumers_with_op(ValueId id, std::string_view op) const {
    std::vector<size_t> out;
    for (size_t n : consumers(id)) {
      if (g_.nodes[n].op == op && !matched_[n]) out.push_back(n);
    }
    return out;
  }
  Result<size_t> one_consumer(ValueId id, std::string_view op, std::string_view role) const {
    std::vector<size_t> found = consumers_with_op(id, op);
    if (found.size() != 1) {
      return not_supported("value '", value(id).name, "' must feed exactly one ", op, " (", role,
                           ") for the CUDA engine's decoder pattern, it feeds ", found.size());
    }
    return found[0];
  }
  // The parameter at input `i` of `node`, checked to be a float weight.
  Result<std::string> param(const graph::Node& node, size_t i) const {
    if (i >= node.inputs.size()) return refuse(node, "missing input " + std::to_string(i));
    const graph::Value& v = value(node.inputs[i]);
    if (v.kind != ValueKind::kParameter) {
      return refuse(node, "input '" + v.name + "' must be a weight");
    }
    if (!is_weight_dtype(v.dtype)) {
      return not_supported("weight '", v.name, "' is ", dtype_name(v.dtype),
                           "; the CUDA engine uploads f32, f16 or bf16 weights as bf16");
    }
    return v.name;
  }
  Result<LinearWeights> linear(size_t n, int64_t out_features, int64_t in_features) {
    const graph::Node& node = g_.nodes[n];
    if (node.inputs.size() != 2 && node.inputs.size() != 3) {
      return refuse(node, "a linear takes x, weight and an optional bias");
    }
    LinearWeights w;
    KVRT_ASSIGN_OR_RETURN(w.weight, param(node, 1));
    const graph::Value& weight = value(node.inputs[1]);
    if (weight.shape.size() != 2 || weight.shape[0].size != out_features ||
        weight.shape[1].size != in_features) {
      return refuse(node, "weight '" + weight.name + "' must be [" + std::to_string(out_features) +
                              ", " + std::to_string(in_features) + "]");
    }
    if (node.inputs.size() == 3) {
      KVRT_ASSIGN_OR_RETURN(w.bias, param(node, 2));
    }
    matched_[n] = true;
    return w;
  }
  Result<float> rms_norm(size_t n, std::string& weight) {
    const graph::Node& node = g_.nodes[n];
    KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op, cpu::prepare_op(node.op, node.name, node.attributes));
    KVRT_ASSIGN_OR_RETURN(weight, param(node, 1));
    matched_[n] = true;
    return op.eps;
  }
  Result<int> input_index(ValueId id) const {
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      if (g_.inputs[i] == id) return static_cast<int>(i);
    }
    return not_supported("value '", value(id).name, "' must be an input of the partition");
  }
  int output_index(ValueId id) const {
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (outputs_[i] == id) return static_cast<int>(i);
    }
    return -1;
  }
  Status check_cache(ValueId cache) const {
    const graph::Value& v = value(cache);
    if (v.dtype != DType::kBF16) {
      return not_supported("cache '", v.name, "' is ", dtype_name(v.dtype),
                           "; the CUDA engine keeps the KV cache in bf16 (export with "
                           "--cache-dtype bf16, the default for --device cuda)");
    }
    return Status();
  }
  Status rope_matches(const graph::Node& node, int64_t heads);
  Result<ValueId> layer(ValueId x, DecoderPlan& plan);

  const graph::Graph& g_;
  std::vector<std::vector<size_t>> consumers_;
  std::vector<bool> matched_;
  std::vector<ValueId> outputs_;
  std::optional<cpu::PreparedOp> rope_;  // the first rope node's parsed attributes
  ValueId position_ = -1;
};

Status Matcher::rope_matches(const graph::Node& node, int64_t heads) {
  KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op, cpu::prepare_op(node.op, node.name, node.attributes));
  if (op.num_heads != heads) {
    return refuse(node, "rotates " + std::to_string(op.num_heads) + " heads, expected " +
                            std::to_string(heads));
  }
  if (node.inputs.size() != 2 || node.inputs[1] != position_) {
    return refuse(node, "must read the partition's position input");
  }
  if (!rope_) {
    rope_ = std::move(op);
  } else if (op.head_dim != rope_->head_dim || op.inv_freq != rope_->inv_freq) {
    return refuse(node, "its rotary frequencies differ from the first rope's");
  }
  return Status();
}

Result<ValueId> Matcher::layer(ValueId x, DecoderPlan& plan) {
  LayerPlan layer;
  const int64_t h = plan.hidden;
  KVRT_ASSIGN_OR_RETURN(size_t norm, one_consumer(x, "rms_norm", "input norm"));
  KVRT_ASSIGN_OR_RETURN(layer.input_norm_eps, rms_norm(norm, layer.input_norm));
  const ValueId normed = g_.nodes[norm].outputs[0];
  std::vector<size_t> projections = consumers_with_op(normed, "linear");
  if (projections.size() != 3 || consumers(normed).size() != 3) {
    return refuse(g_.nodes[norm], "its output must feed exactly the q, k and v projections");
  }
  // q: linear -> rope -> attention[0]; k: linear -> rope -> kv_cache_write; v: linear ->
  // kv_cache_write. Roles come from dataflow, not names or order.
  std::optional<size_t> q, k, v, q_rope, k_rope, k_write, v_write;
  for (size_t p : projections) {
    const ValueId out = g_.nodes[p].outputs[0];
    std::vector<size_t> ropes = consumers_with_op(out, "rope");
    std::vector<size_t> writes = consumers_with_op(out, "kv_cache_write");
    if (consumers(out).size() != 1) return refuse(g_.nodes[p], "its output must have one reader");
    if (writes.size() == 1) {
      v = p, v_write = writes[0];
    } else if (ropes.size() == 1) {
      const ValueId rotated = g_.nodes[ropes[0]].outputs[0];
      std::vector<size_t> rotated_writes = consumers_with_op(rotated, "kv_cache_write");
      if (rotated_writes.size() == 1) {
        k = p, k_rope = ropes[0], k_write = rotated_writes[0];
      } else {
        q = p, q_rope = ropes[0];
      }
    }
  }
  if (!q || !k || !v) {
    return refuse(g_.nodes[norm],
                  "its projections are not q (rope, attention), k (rope, cache "
                  "write) and v (cache write)");
  }
  const ValueId q_rot = g_.nodes[*q_rope].outputs[0];
  KVRT_ASSIGN_OR_RETURN(size_t attention, one_consumer(q_rot, "attention", "attention query"));
  const graph::Node& att = g_.nodes[attention];
  KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp att_op, cpu::prepare_op(att.op, att.name, att.attributes));
  if (plan.layers.empty() && plan.q_heads == 0) {
    plan.q_heads = att_op.num_heads;
    plan.kv_heads = att_op.num_kv_heads;
    plan.head_dim = att_op.head_dim;
    plan.attention_scale = att_op.scale;
  }
  if (att_op.num_heads != plan.q_heads || att_op.num_kv_heads != plan.kv_heads ||
      att_op.head_dim != plan.head_dim || att_op.scale != plan.attention_scale) {
    return refuse(att, "every layer must have the first layer's heads, head_dim and scale");
  }
  const int64_t d = plan.head_dim, q_width = plan.q_heads * d, kv_width = plan.kv_heads * d;
  KVRT_RETURN_IF_ERROR(rope_matches(g_.nodes[*q_rope], plan.q_heads));
  KVRT_RETURN_IF_ERROR(rope_matches(g_.nodes[*k_rope], plan.kv_heads));
  matched_[*q_rope] = matched_[*k_rope] = true;
  KVRT_ASSIGN_OR_RETURN(layer.q, linear(*q, q_width, h));
  KVRT_ASSIGN_OR_RETURN(layer.k, linear(*k, kv_width, h));
  KVRT_ASSIGN_OR_RETURN(layer.v, linear(*v, kv_width, h));

  // The cache writes: [cache, rows, position] -> the cache, updated in place.
  for (auto [write, cache_input, cache_output] :
       {std::tuple{*k_write, &layer.k_cache_input, &layer.k_cache_output},
        std::tuple{*v_write, &layer.v_cache_input, &layer.v_cache_output}}) {
    const graph::Node& node = g_.nodes[write];
    if (node.inputs.size() != 3 || node.inputs[2] != position_) {
      return refuse(node, "must write at the partition's position input");
    }
    KVRT_RETURN_IF_ERROR(check_cache(node.inputs[0]));
    KVRT_ASSIGN_OR_RETURN(*cache_input, input_index(node.inputs[0]));
    *cache_output = output_index(node.outputs[0]);
    if (*cache_output < 0) return refuse(node, "its updated cache must be a partition output");
    const graph::Value& cache = value(node.inputs[0]);
    if (cache.shape.size() != 3 || cache.shape[0].size != plan.kv_heads ||
        cache.shape[2].size != d) {
      return refuse(node, "cache '" + cache.name + "' must be [kv_heads, max_seq, head_dim]");
    }
    if (plan.max_seq == 0) plan.max_seq = cache.shape[1].size;
    if (cache.shape[1].size != plan.max_seq) {
      return refuse(node, "every cache must hold the same number of positions");
    }
    matched_[write] = true;
  }
  if (att.inputs.size() != 4 || att.inputs[1] != g_.nodes[*k_write].outputs[0] ||
      att.inputs[2] != g_.nodes[*v_write].outputs[0] || att.inputs[3] != position_) {
    return refuse(att, "must read this layer's updated k and v caches at the position input");
  }
  matched_[attention] = true;
  const ValueId attended = att.outputs[0];
  KVRT_ASSIGN_OR_RETURN(size_t o, one_consumer(attended, "linear", "o_proj"));
  KVRT_ASSIGN_OR_RETURN(layer.o, linear(o, h, q_width));

  // Residual adds: x + o, then x + down (either operand order).
  auto residual = [&](ValueId skip, ValueId branch) -> Result<ValueId> {
    KVRT_ASSIGN_OR_RETURN(size_t add, one_consumer(branch, "add", "residual"));
    const graph::Node& node = g_.nodes[add];
    const bool ok =
        node.inputs.size() == 2 && ((node.inputs[0] == skip && node.inputs[1] == branch) ||
                                    (node.inputs[1] == skip && node.inputs[0] == branch));
    if (!ok) return refuse(node, "must add the block's output to the residual stream");
    matched_[add] = true;
    return node.outputs[0];
  };
  KVRT_ASSIGN_OR_RETURN(ValueId mid, residual(x, g_.nodes[o].outputs[0]));
  if (consumers(x).size() != 2) {
    return refuse(g_.nodes[norm], "the residual stream must feed only the norm and the add");
  }

  KVRT_ASSIGN_OR_RETURN(size_t norm2, one_consumer(mid, "rms_norm", "post-attention norm"));
  KVRT_ASSIGN_OR_RETURN(layer.post_attention_norm_eps, rms_norm(norm2, layer.post_attention_norm));
  const ValueId normed2 = g_.nodes[norm2].outputs[0];
  KVRT_ASSIGN_OR_RETURN(size_t gate_node, std::invoke([&]() -> Result<size_t> {
                          for (size_t p : consumers_with_op(normed2, "linear")) {
                            const ValueId out = g_.nodes[p].outputs[0];
                            for (size_t s : consumers_with_op(out, "silu_mul")) {
                              if (g_.nodes[s].inputs[0] == out) return p;
                            }
                          }
                          return refuse(g_.nodes[norm2], "its output must feed gate and up");
                        }));
  KVRT_ASSIGN_OR_RETURN(size_t silu,
                        one_consumer(g_.nodes[gate_node].outputs[0], "silu_mul", "SwiGLU"));
  const graph::Node& silu_node = g_.nodes[silu];
  if (silu_node.inputs.size() != 2) return refuse(silu_node, "takes gate and up");
  const ValueId up_out = silu_node.inputs[1];
  std::optional<size_t> up_node;
  for (size_t p : consumers_with_op(normed2, "linear")) {
    if (g_.nodes[p].outputs[0] == up_out) up_node = p;
  }
  if (!up_node || consumers(normed2).size() != 2 || consumers(up_out).size() != 1 ||
      consumers(g_.nodes[gate_node].outputs[0]).size() != 1) {
    return refuse(silu_node, "must multiply silu(gate(x)) by up(x) of the same norm");
  }
  int64_t inter = value(g_.nodes[gate_node].inputs[1]).shape.empty()
                      ? 0
                      : value(g_.nodes[gate_node].inputs[1]).shape[0].size;
  if (plan.intermediate == 0) plan.intermediate = inter;
  if (inter != plan.intermediate) {
    return refuse(g_.nodes[gate_node], "every layer must have the same MLP width");
  }
  KVRT_ASSIGN_OR_RETURN(layer.gate, linear(gate_node, inter, h));
  KVRT_ASSIGN_OR_RETURN(layer.up, linear(*up_node, inter, h));
  matched_[silu] = true;
  KVRT_ASSIGN_OR_RETURN(size_t down, one_consumer(silu_node.outputs[0], "linear", "down_proj"));
  KVRT_ASSIGN_OR_RETURN(layer.down, linear(down, h, inter));
  KVRT_ASSIGN_OR_RETURN(ValueId out, residual(mid, g_.nodes[down].outputs[0]));
  if (consumers(mid).size() != 2) {
    return refuse(g_.nodes[norm2], "the residual stream must feed only the norm and the add");
  }
  plan.layers.push_back(std::move(layer));
  return out;
}

// What the other model families add (docs/graph.md) and the CUDA kernels do not run:
// refused up front, naming the node, rather than met as a pattern mismatch.
Status refuse_family_features(const graph::Node& node) {
  auto refuse = [&](const std::string& what) {
    return not_supported("node '", node.name, "' (", node.op, "): ", what,
                         " is not supported by the CUDA engine");
  };
  for (std::string_view op : {"scale", "gelu_tanh_mul", "softcap", "slice"}) {
    if (node.op == op) return refuse("op '" + std::string(op) + "'");
  }
  if (node.op != "rms_norm" && node.op != "rope" && node.op != "attention") return Status();
  KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op, cpu::prepare_op(node.op, node.name, node.attributes));
  if (op.unit_offset) return refuse("an rms_norm scaling by (1 + weight)");
  if (op.norm_width > 0) return refuse("a per-head rms_norm");
  if (op.kind == cpu::OpKind::kRope && op.rotary_dim != op.head_dim) {
    return refuse("partial rotary (rotary_dim " + std::to_string(op.rotary_dim) + ")");
  }
  if (op.window > 0) return refuse("sliding-window attention");
  return Status();
}

Result<DecoderPlan> Matcher::run() {
  for (const graph::Node& node : g_.nodes) KVRT_RETURN_IF_ERROR(refuse_family_features(node));
  DecoderPlan plan;
  outputs_ = g_.outputs;
  for (const graph::BufferMutation& m : g_.mutations) {
    if (std::find(outputs_.begin(), outputs_.end(), m.updated) == outputs_.end()) {
      outputs_.push_back(m.updated);
    }
  }
  // Inputs: tokens i32 [1, T], position i32 [1], and the caches.
  for (size_t i = 0; i < g_.inputs.size(); ++i) {
    const graph::Value& v = value(g_.inputs[i]);
    if (v.kind != ValueKind::kInput) continue;
    if (v.dtype == DType::kI32 && v.shape.size() == 2 && v.shape[0].size == 1) {
      plan.tokens_input = static_cast<int>(i);
      plan.max_tokens = v.shape[1].is_dynamic() ? v.shape[1].max : v.shape[1].size;
    } else if (v.dtype == DType::kI32 && v.shape.size() == 1 && v.shape[0].size == 1) {
      plan.position_input = static_cast<int>(i);
      position_ = g_.inputs[i];
    } else {
      return not_supported("partition input '", v.name,
                           "' is neither tokens i32 [1, T] nor position i32 [1]; the CUDA "
                           "engine runs whole decoders from token ids to logits");
    }
  }
  if (plan.tokens_input < 0 || plan.position_input < 0) {
    return not_supported("the CUDA engine needs the partition to take tokens and position");
  }
  const ValueId tokens = g_.inputs[static_cast<size_t>(plan.tokens_input)];
  KVRT_ASSIGN_OR_RETURN(size_t embed, one_consumer(tokens, "embedding", "embedding"));
  KVRT_ASSIGN_OR_RETURN(plan.embedding, param(g_.nodes[embed], 1));
  const graph::Value& table = value(g_.nodes[embed].inputs[1]);
  if (table.shape.size() != 2) return refuse(g_.nodes[embed], "the table must be [V, H]");
  plan.vocab = table.shape[0].size;
  plan.hidden = table.shape[1].size;
  matched_[embed] = true;
  ValueId x = g_.nodes[embed].outputs[0];

  // Layers until the stream meets the final norm (its output feeds take_last).
  while (true) {
    std::vector<size_t> norms = consumers_with_op(x, "rms_norm");
    if (norms.size() != 1) {
      return not_supported("value '", value(x).name, "' must feed one rms_norm");
    }
    const ValueId normed = g_.nodes[norms[0]].outputs[0];
    if (!consumers_with_op(normed, "take_last").empty()) break;
    KVRT_ASSIGN_OR_RETURN(x, layer(x, plan));
  }
  KVRT_ASSIGN_OR_RETURN(size_t final_norm, one_consumer(x, "rms_norm", "final norm"));
  KVRT_ASSIGN_OR_RETURN(plan.final_norm_eps, rms_norm(final_norm, plan.final_norm));
  KVRT_ASSIGN_OR_RETURN(size_t last,
                        one_consumer(g_.nodes[final_norm].outputs[0], "take_last", "last token"));
  matched_[last] = true;
  KVRT_ASSIGN_OR_RETURN(size_t head, one_consumer(g_.nodes[last].outputs[0], "linear", "LM head"));
  KVRT_ASSIGN_OR_RETURN(LinearWeights lm_head, linear(head, plan.vocab, plan.hidden));
  if (!lm_head.bias.empty()) return refuse(g_.nodes[head], "an LM head bias is not supported");
  plan.lm_head = lm_head.weight;
  const ValueId logits = g_.nodes[head].outputs[0];
  plan.logits_output = output_index(logits);
  if (plan.logits_output < 0 || value(logits).dtype != DType::kF32) {
    return refuse(g_.nodes[head], "its f32 logits must be a partition output");
  }
  // The greedy choice, when the graph makes it: argmax of the logits into i32 [1, 1].
  const std::vector<size_t> choices = consumers_with_op(logits, "argmax");
  if (choices.size() > 1) return refuse(g_.nodes[choices[1]], "a second argmax of the logits");
  if (choices.size() == 1) {
    const ValueId chosen = g_.nodes[choices[0]].outputs[0];
    plan.next_token_output = output_index(chosen);
    if (plan.next_token_output < 0 || value(chosen).dtype != DType::kI32) {
      return refuse(g_.nodes[choices[0]], "its i32 token must be a partition output");
    }
    matched_[choices[0]] = true;
  }
  for (size_t n = 0; n < g_.nodes.size(); ++n) {
    if (!matched_[n]) return refuse(g_.nodes[n], "this node is outside it");
  }
  if (outputs_.size() != 1 + (plan.next_token_output >= 0) + 2 * plan.layers.size()) {
    return not_supported(
        "the partition has outputs beyond the logits, the next token and the updated caches");
  }
  if (plan.layers.empty()) return not_supported("the partition has no decoder layer");

  // What the kernels are built for.
  if (plan.head_dim < 2 || plan.head_dim > 256 || plan.head_dim % 2 != 0) {
    return not_supported("head_dim ", plan.head_dim,
                         ": the CUDA attention kernels run even head dims up to 256");
  }
  if (plan.q_heads % plan.kv_heads != 0) {
    return not_supported("q heads ", plan.q_heads, " are not a multiple of kv heads ",
                         plan.kv_heads);
  }
  if (plan.hidden % 8 != 0 || plan.intermediate % 8 != 0 || (plan.q_heads * plan.head_dim) % 8) {
    return not_supported("hidden ", plan.hidden, " and MLP width ", plan.intermediate,
                         " must be multiples of 8 for the CUDA linear kernels");
  }
  plan.rope_inv_freq = rope_->inv_freq;
  return plan;
}

}  // namespace

bool attention_head_dim_supported(int64_t head_dim) {
  return head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128;
}

Result<DecoderPlan> plan_decoder(const graph::Graph& graph) {
  return Matcher(graph).run();
}

}  // namespace kvrt::engine::cuda
