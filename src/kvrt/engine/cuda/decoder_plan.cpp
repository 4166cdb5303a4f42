#include "kvrt/engine/cuda/decoder_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
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
                         "): the CUDA engine runs the decoder pattern of docs/cuda-engine.md; ",
                         why);
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
  // An rms_norm over `width`-wide rows (head_dim > 0: a per-head norm of that width).
  Result<NormPlan> rms_norm(size_t n, int64_t width, int64_t head_dim = 0) {
    const graph::Node& node = g_.nodes[n];
    KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op, cpu::prepare_op(node.op, node.name, node.attributes));
    if (op.norm_width != head_dim) {
      return refuse(
          node, head_dim > 0 ? "expected a norm of each head" : "expected a norm of whole rows");
    }
    NormPlan norm;
    KVRT_ASSIGN_OR_RETURN(norm.weight, param(node, 1));
    const graph::Value& weight = value(node.inputs[1]);
    if (weight.shape.size() != 1 || weight.shape[0].size != width) {
      return refuse(node, "weight '" + weight.name + "' must be [" + std::to_string(width) + "]");
    }
    norm.eps = op.eps;
    norm.unit_offset = op.unit_offset;
    matched_[n] = true;
    return norm;
  }
  // The single node reading `id`, when it is an `op`; nullopt otherwise.
  std::optional<size_t> only_consumer_if(ValueId id, std::string_view op) const {
    if (consumers(id).size() != 1) return std::nullopt;
    const size_t n = consumers(id)[0];
    if (g_.nodes[n].op != op || matched_[n]) return std::nullopt;
    return n;
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
  Result<int> rope_matches(const graph::Node& node, int64_t heads, DecoderPlan& plan);
  Result<std::array<ValueId, 3>> projections(ValueId normed, const graph::Node& norm,
                                             const DecoderPlan& plan, LayerPlan& layer);
  Status attention_block(ValueId normed, const graph::Node& norm, DecoderPlan& plan,
                         LayerPlan& layer, ValueId& attended);
  Result<ValueId> mlp_block(ValueId normed, const graph::Node& norm, DecoderPlan& plan,
                            LayerPlan& layer);
  Result<ValueId> output_norm(ValueId out, int64_t hidden, NormPlan& norm);
  Result<ValueId> layer(ValueId x, DecoderPlan& plan);

  const graph::Graph& g_;
  std::vector<std::vector<size_t>> consumers_;
  std::vector<bool> matched_;
  std::vector<ValueId> outputs_;
  ValueId position_ = -1;
};

// A rope node of this layer: its heads, the position input and its rotary table, which
// is added to the plan's tables unless an equal one is there; returns the table's index.
Result<int> Matcher::rope_matches(const graph::Node& node, int64_t heads, DecoderPlan& plan) {
  KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op, cpu::prepare_op(node.op, node.name, node.attributes));
  if (op.num_heads != heads || op.head_dim != plan.head_dim) {
    return refuse(node, "rotates " + std::to_string(op.num_heads) + " heads of " +
                            std::to_string(op.head_dim) + ", expected " + std::to_string(heads) +
                            " of " + std::to_string(plan.head_dim));
  }
  if (node.inputs.size() != 2 || node.inputs[1] != position_) {
    return refuse(node, "must read the partition's position input");
  }
  if (plan.rotary_dim == 0) plan.rotary_dim = op.rotary_dim;
  if (op.rotary_dim != plan.rotary_dim) {
    return refuse(node, "every layer must rotate the first layer's " +
                            std::to_string(plan.rotary_dim) + " dims");
  }
  matched_[static_cast<size_t>(&node - g_.nodes.data())] = true;
  for (size_t t = 0; t < plan.rope_tables.size(); ++t) {
    if (plan.rope_tables[t] == op.inv_freq) return static_cast<int>(t);
  }
  plan.rope_tables.push_back(std::move(op.inv_freq));
  return static_cast<int>(plan.rope_tables.size() - 1);
}

// One of q, k, v on its way from the projection to the cache or the attention:
// rows (─► head norm) (─► rope) (─► kv_cache_write).
struct Branch {
  ValueId rows = -1;
  size_t producer = 0;  // the linear, or the slice of the fused linear
  std::optional<size_t> norm, rope, write;
  ValueId end = -1;
};

// The projections of the input norm's output `normed`: q, k and v linears, or one fused
// linear cut by three slices in q|k|v order (Phi-3). Roles come from dataflow (what reads
// each), never from names or order; then the shapes, head norms, rope and cache writes
// are checked against the attention's heads.
Status Matcher::attention_block(ValueId normed, const graph::Node& norm, DecoderPlan& plan,
                                LayerPlan& layer, ValueId& attended) {
  const int64_t h = plan.hidden;
  std::vector<size_t> linears = consumers_with_op(normed, "linear");
  std::vector<std::pair<ValueId, size_t>> rows;  // value, producing node
  std::optional<size_t> fused;
  if (linears.size() == 3 && consumers(normed).size() == 3) {
    for (size_t p : linears) rows.emplace_back(g_.nodes[p].outputs[0], p);
  } else if (linears.size() == 1 && consumers(normed).size() == 1) {
    fused = linears[0];
    const ValueId out = g_.nodes[*fused].outputs[0];
    for (size_t s : consumers_with_op(out, "slice")) rows.emplace_back(g_.nodes[s].outputs[0], s);
    if (rows.size() != 3 || consumers(out).size() != 3) {
      return refuse(g_.nodes[*fused], "a fused q/k/v projection must be cut into three slices");
    }
  } else {
    return refuse(norm, "its output must feed the q, k and v projections (or one fused qkv)");
  }
  std::optional<Branch> q, k, v;
  for (auto [id, producer] : rows) {
    Branch b{id, producer};
    ValueId at = id;
    if (auto n = only_consumer_if(at, "rms_norm")) b.norm = n, at = g_.nodes[*n].outputs[0];
    if (auto r = only_consumer_if(at, "rope")) b.rope = r, at = g_.nodes[*r].outputs[0];
    if (auto w = only_consumer_if(at, "kv_cache_write"); w && g_.nodes[*w].inputs[1] == at) {
      b.write = w;
    }
    b.end = at;
    if (b.rope && b.write) {
      k = b;
    } else if (b.rope) {
      q = b;
    } else if (b.write && !b.norm) {
      v = b;
    }
  }
  if (!q || !k || !v) {
    return refuse(norm,
                  "its projections are not q (rope, attention), k (rope, cache write) "
                  "and v (cache write)");
  }
  KVRT_ASSIGN_OR_RETURN(size_t attention, one_consumer(q->end, "attention", "attention query"));
  const graph::Node& att = g_.nodes[attention];
  KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp att_op, cpu::prepare_op(att.op, att.name, att.attributes));
  if (plan.q_heads == 0) {
    plan.q_heads = att_op.num_heads;
    plan.kv_heads = att_op.num_kv_heads;
    plan.head_dim = att_op.head_dim;
    plan.attention_scale = att_op.scale;
  }
  if (att_op.num_heads != plan.q_heads || att_op.num_kv_heads != plan.kv_heads ||
      att_op.head_dim != plan.head_dim || att_op.scale != plan.attention_scale) {
    return refuse(att, "every layer must have the first layer's heads, head_dim and scale");
  }
  layer.window = att_op.window;
  const int64_t d = plan.head_dim, q_width = plan.q_heads * d, kv_width = plan.kv_heads * d;

  if (fused) {
    KVRT_ASSIGN_OR_RETURN(layer.q, linear(*fused, q_width + 2 * kv_width, h));
    layer.qkv_fused = true;
    for (auto [branch, begin, size] :
         {std::tuple{&*q, int64_t{0}, q_width}, std::tuple{&*k, q_width, kv_width},
          std::tuple{&*v, q_width + kv_width, kv_width}}) {
      const graph::Node& slice = g_.nodes[branch->producer];
      KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op,
                            cpu::prepare_op(slice.op, slice.name, slice.attributes));
      if (op.begin != begin || op.size != size) {
        return refuse(slice, "the fused projection's slices must be q, k, v in that order");
      }
      matched_[branch->producer] = true;
    }
  } else {
    for (const Branch* b : {&*q, &*k, &*v}) {
      if (consumers(b->rows).size() != 1) {
        return refuse(g_.nodes[b->producer], "its output must have one reader");
      }
    }
    KVRT_ASSIGN_OR_RETURN(layer.q, linear(q->producer, q_width, h));
    KVRT_ASSIGN_OR_RETURN(layer.k, linear(k->producer, kv_width, h));
    KVRT_ASSIGN_OR_RETURN(layer.v, linear(v->producer, kv_width, h));
  }
  if (q->norm.has_value() != k->norm.has_value()) {
    return refuse(g_.nodes[q->norm ? *q->norm : *k->norm],
                  "q and k must both have a head norm or neither");
  }
  if (q->norm) {
    KVRT_ASSIGN_OR_RETURN(layer.q_norm, rms_norm(*q->norm, d, d));
    KVRT_ASSIGN_OR_RETURN(layer.k_norm, rms_norm(*k->norm, d, d));
  }
  KVRT_ASSIGN_OR_RETURN(layer.rope_table, rope_matches(g_.nodes[*q->rope], plan.q_heads, plan));
  KVRT_ASSIGN_OR_RETURN(int k_table, rope_matches(g_.nodes[*k->rope], plan.kv_heads, plan));
  if (k_table != layer.rope_table) {
    return refuse(g_.nodes[*k->rope], "k must rotate with q's frequencies");
  }

  // The cache writes: [cache, rows, position] -> the cache, updated in place.
  for (auto [write, cache_input, cache_output] :
       {std::tuple{*k->write, &layer.k_cache_input, &layer.k_cache_output},
        std::tuple{*v->write, &layer.v_cache_input, &layer.v_cache_output}}) {
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
  if (att.inputs.size() != 4 || att.inputs[1] != g_.nodes[*k->write].outputs[0] ||
      att.inputs[2] != g_.nodes[*v->write].outputs[0] || att.inputs[3] != position_) {
    return refuse(att, "must read this layer's updated k and v caches at the position input");
  }
  matched_[attention] = true;
  attended = att.outputs[0];
  return Status();
}

// A block's output (o_proj, down_proj) normalized before the residual add (Gemma 3's
// post norms), when it is; returns the value the add reads.
Result<ValueId> Matcher::output_norm(ValueId out, int64_t hidden, NormPlan& norm) {
  std::optional<size_t> n = only_consumer_if(out, "rms_norm");
  if (!n) return out;
  KVRT_ASSIGN_OR_RETURN(norm, rms_norm(*n, hidden));
  return g_.nodes[*n].outputs[0];
}

// gate and up from the pre-MLP norm's output (two linears, or one fused linear cut by two
// slices in gate|up order), the activation, and down; returns down's output.
Result<ValueId> Matcher::mlp_block(ValueId normed, const graph::Node& norm, DecoderPlan& plan,
                                   LayerPlan& layer) {
  const int64_t h = plan.hidden;
  std::vector<size_t> linears = consumers_with_op(normed, "linear");
  std::vector<std::pair<ValueId, size_t>> rows;  // value, producing node
  std::optional<size_t> fused;
  if (linears.size() == 2 && consumers(normed).size() == 2) {
    for (size_t p : linears) rows.emplace_back(g_.nodes[p].outputs[0], p);
  } else if (linears.size() == 1 && consumers(normed).size() == 1) {
    fused = linears[0];
    const ValueId out = g_.nodes[*fused].outputs[0];
    for (size_t s : consumers_with_op(out, "slice")) rows.emplace_back(g_.nodes[s].outputs[0], s);
    if (rows.size() != 2 || consumers(out).size() != 2) {
      return refuse(g_.nodes[*fused], "a fused gate/up projection must be cut into two slices");
    }
  } else {
    return refuse(norm, "its output must feed the gate and up projections (or one fused)");
  }
  // The activation reads gate first, up second.
  std::optional<size_t> act;
  size_t gate = 0, up = 0;
  for (size_t i = 0; i < 2 && !act; ++i) {
    for (std::string_view op : {"silu_mul", "gelu_tanh_mul"}) {
      std::optional<size_t> n = only_consumer_if(rows[i].first, op);
      if (n && g_.nodes[*n].inputs.size() == 2 && g_.nodes[*n].inputs[0] == rows[i].first &&
          g_.nodes[*n].inputs[1] == rows[1 - i].first && consumers(rows[1 - i].first).size() == 1) {
        act = n, gate = i, up = 1 - i;
      }
    }
  }
  if (!act) {
    return refuse(norm, "its projections must meet in silu_mul or gelu_tanh_mul(gate, up)");
  }
  const graph::Node& act_node = g_.nodes[*act];
  const Activation kind = act_node.op == "silu_mul" ? Activation::kSilu : Activation::kGeluTanh;
  if (plan.layers.empty()) plan.activation = kind;
  if (kind != plan.activation) return refuse(act_node, "every layer must use the same activation");
  const graph::Value& gate_rows = value(rows[gate].first);
  const int64_t inter = gate_rows.shape.size() == 2 ? gate_rows.shape[1].size : 0;
  if (plan.intermediate == 0) plan.intermediate = inter;
  if (inter != plan.intermediate) {
    return refuse(g_.nodes[rows[gate].second], "every layer must have the same MLP width");
  }
  if (fused) {
    KVRT_ASSIGN_OR_RETURN(layer.gate, linear(*fused, 2 * inter, h));
    layer.gate_up_fused = true;
    for (auto [i, begin] : {std::pair{gate, int64_t{0}}, std::pair{up, inter}}) {
      const graph::Node& slice = g_.nodes[rows[i].second];
      KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op,
                            cpu::prepare_op(slice.op, slice.name, slice.attributes));
      if (op.begin != begin || op.size != inter) {
        return refuse(slice, "the fused projection's slices must be gate, up in that order");
      }
      matched_[rows[i].second] = true;
    }
  } else {
    KVRT_ASSIGN_OR_RETURN(layer.gate, linear(rows[gate].second, inter, h));
    KVRT_ASSIGN_OR_RETURN(layer.up, linear(rows[up].second, inter, h));
  }
  matched_[*act] = true;
  KVRT_ASSIGN_OR_RETURN(size_t down, one_consumer(act_node.outputs[0], "linear", "down_proj"));
  KVRT_ASSIGN_OR_RETURN(layer.down, linear(down, h, inter));
  return g_.nodes[down].outputs[0];
}

Result<ValueId> Matcher::layer(ValueId x, DecoderPlan& plan) {
  LayerPlan layer;
  const int64_t h = plan.hidden;
  KVRT_ASSIGN_OR_RETURN(size_t norm, one_consumer(x, "rms_norm", "input norm"));
  KVRT_ASSIGN_OR_RETURN(layer.input_norm, rms_norm(norm, h));
  ValueId attended = -1;
  KVRT_RETURN_IF_ERROR(
      attention_block(g_.nodes[norm].outputs[0], g_.nodes[norm], plan, layer, attended));
  const int64_t q_width = plan.q_heads * plan.head_dim;
  KVRT_ASSIGN_OR_RETURN(size_t o, one_consumer(attended, "linear", "o_proj"));
  KVRT_ASSIGN_OR_RETURN(layer.o, linear(o, h, q_width));
  KVRT_ASSIGN_OR_RETURN(ValueId o_out,
                        output_norm(g_.nodes[o].outputs[0], h, layer.attention_output_norm));

  // Residual adds: x + attention, then x + MLP (either operand order).
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
  KVRT_ASSIGN_OR_RETURN(ValueId mid, residual(x, o_out));
  if (consumers(x).size() != 2) {
    return refuse(g_.nodes[norm], "the residual stream must feed only the norm and the add");
  }

  KVRT_ASSIGN_OR_RETURN(size_t norm2, one_consumer(mid, "rms_norm", "pre-MLP norm"));
  KVRT_ASSIGN_OR_RETURN(layer.post_attention_norm, rms_norm(norm2, h));
  KVRT_ASSIGN_OR_RETURN(ValueId down,
                        mlp_block(g_.nodes[norm2].outputs[0], g_.nodes[norm2], plan, layer));
  KVRT_ASSIGN_OR_RETURN(ValueId mlp_out, output_norm(down, h, layer.mlp_output_norm));
  KVRT_ASSIGN_OR_RETURN(ValueId out, residual(mid, mlp_out));
  if (consumers(mid).size() != 2) {
    return refuse(g_.nodes[norm2], "the residual stream must feed only the norm and the add");
  }
  plan.layers.push_back(std::move(layer));
  return out;
}
Result<DecoderPlan> Matcher::run() {
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
  // Gemma's normalizer: the embedding times sqrt(hidden).
  if (std::optional<size_t> scale = only_consumer_if(x, "scale")) {
    const graph::Node& node = g_.nodes[*scale];
    KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op, cpu::prepare_op(node.op, node.name, node.attributes));
    if (!(op.factor > 0)) return refuse(node, "the embedding scale must be positive");
    plan.embedding_scale = op.factor;
    matched_[*scale] = true;
    x = node.outputs[0];
  }

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
  KVRT_ASSIGN_OR_RETURN(plan.final_norm, rms_norm(final_norm, plan.hidden));
  KVRT_ASSIGN_OR_RETURN(size_t last,
                        one_consumer(g_.nodes[final_norm].outputs[0], "take_last", "last token"));
  matched_[last] = true;
  KVRT_ASSIGN_OR_RETURN(size_t head, one_consumer(g_.nodes[last].outputs[0], "linear", "LM head"));
  KVRT_ASSIGN_OR_RETURN(LinearWeights lm_head, linear(head, plan.vocab, plan.hidden));
  if (!lm_head.bias.empty()) return refuse(g_.nodes[head], "an LM head bias is not supported");
  plan.lm_head = lm_head.weight;
  ValueId logits = g_.nodes[head].outputs[0];
  // Gemma 2/3's final_logit_softcapping, on the LM head's f32 output.
  if (std::optional<size_t> cap = only_consumer_if(logits, "softcap")) {
    const graph::Node& node = g_.nodes[*cap];
    KVRT_ASSIGN_OR_RETURN(cpu::PreparedOp op, cpu::prepare_op(node.op, node.name, node.attributes));
    if (!(op.factor > 0)) return refuse(node, "the cap must be positive");
    if (value(logits).dtype != DType::kF32) return refuse(node, "it must cap f32 logits");
    plan.logit_softcap = op.factor;
    matched_[*cap] = true;
    logits = node.outputs[0];
  }
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
