// The attention block of every family, and the small helpers the layers share.
//
//   normed [T,H] ─► q, k, v linear (Phi-3: qkv linear ─► three slices)
//               ─► q_norm, k_norm per head (Qwen3, Gemma 3)
//               ─► rope q, k (Gemma 3 local layers: their own base; Phi-3: partial)
//               ─► kv_cache_write k, v ─► attention (window on sliding layers) ─► o linear
#include <cmath>

#include "kvrt/frontend/decoder_builder.h"

namespace kvrt::frontend::detail {

using graph::Dim;
using graph::ValueId;
using graph::ValueKind;
using nlohmann::json;

ValueId GraphWriter::input(std::string name, DType dtype, std::vector<Dim> shape) {
  ValueId id = graph_.add_value({std::move(name), dtype, std::move(shape), ValueKind::kInput});
  graph_.inputs.push_back(id);
  return id;
}

ValueId GraphWriter::buffer(std::string name, DType dtype, std::vector<Dim> shape) {
  return graph_.add_value({std::move(name), dtype, std::move(shape), ValueKind::kBuffer});
}

ValueId GraphWriter::param(const std::string& name) {
  auto known = params_.find(name);
  if (known != params_.end()) return known->second;
  const TensorRecord& record = weights_.find(name)->record;  // checked before building
  std::vector<Dim> shape;
  for (int64_t d : record.shape) shape.push_back(Dim::fixed(d));
  ValueId id = graph_.add_value({name, record.dtype, std::move(shape), ValueKind::kParameter});
  params_.emplace(name, id);
  return id;
}

ValueId GraphWriter::node(const std::string& name, const char* op, std::vector<ValueId> inputs,
                          std::vector<Dim> shape, json attributes, const std::string& value_name,
                          DType dtype) {
  ValueId out = graph_.add_value(
      {value_name.empty() ? name : value_name, dtype, std::move(shape), ValueKind::kIntermediate});
  graph_.nodes.push_back({name, op, std::move(inputs), {out}, std::move(attributes)});
  return out;
}

ValueId DecoderBuilder::linear(const std::string& node, ValueId x, const std::string& weight,
                               bool bias, Dim n) {
  std::vector<ValueId> inputs = {x, w_.param(weight + ".weight")};
  if (bias) inputs.push_back(w_.param(weight + ".bias"));
  return w_.node(node, "linear", std::move(inputs), {d_.t, n});
}

ValueId DecoderBuilder::norm(const std::string& node, ValueId x, const std::string& weight,
                             Dim width, int64_t head_dim) {
  json attributes = {{"eps", c_.rms_norm_eps}};
  if (is_gemma(c_.architecture)) attributes["unit_offset"] = true;
  if (head_dim > 0) attributes["head_dim"] = head_dim;
  return w_.node(node, "rms_norm", {x, w_.param(weight)}, {d_.t, width}, std::move(attributes));
}

ValueId DecoderBuilder::slice(const std::string& node, ValueId x, int64_t begin, int64_t size) {
  return w_.node(node, "slice", {x}, {d_.t, Dim::fixed(size)}, {{"begin", begin}, {"size", size}});
}

ValueId DecoderBuilder::cache_write(const std::string& node, const std::string& name,
                                    ValueId rows) {
  const std::vector<Dim> shape = {Dim::fixed(c_.num_key_value_heads), Dim::fixed(d_.max_seq),
                                  Dim::fixed(c_.head_dim)};
  ValueId cache = w_.buffer(name, options_.cache_dtype, shape);
  ValueId updated = w_.node(node, "kv_cache_write", {cache, rows, position_}, shape, json::object(),
                            name + ".updated", options_.cache_dtype);
  w_.graph().mutations.push_back({cache, updated});
  return updated;
}

namespace {

bool is_sliding(const ModelConfig& c, int64_t layer) {
  return !c.sliding_layers.empty() && c.sliding_layers[static_cast<size_t>(layer)];
}

}  // namespace

json DecoderBuilder::rope_attributes(int64_t layer, int64_t heads) const {
  // Gemma 3's sliding layers rotate with rope_local_base_freq and no scaling.
  const bool local = c_.architecture == Architecture::kGemma3 && is_sliding(c_, layer);
  json attributes = {{"num_heads", heads},
                     {"head_dim", c_.head_dim},
                     {"theta", local ? c_.local_rope_theta : c_.rope_theta},
                     {"scaling", (local ? c_.local_rope_scaling : c_.rope_scaling).to_json()}};
  if (c_.rotary_dim != c_.head_dim) attributes["rotary_dim"] = c_.rotary_dim;
  return attributes;
}

json DecoderBuilder::attention_attributes(int64_t layer) const {
  const double scale = c_.query_pre_attn_scalar ? std::pow(*c_.query_pre_attn_scalar, -0.5)
                                                : 1.0 / std::sqrt(static_cast<double>(c_.head_dim));
  json attributes = {{"num_heads", c_.num_attention_heads},
                     {"num_kv_heads", c_.num_key_value_heads},
                     {"head_dim", c_.head_dim},
                     {"scale", scale}};
  // A window as long as the cache never drops a row: the attention is left full.
  if (is_sliding(c_, layer) && c_.sliding_window && *c_.sliding_window < d_.max_seq) {
    attributes["window"] = *c_.sliding_window;
  }
  return attributes;
}

ValueId DecoderBuilder::attention_block(int64_t layer, ValueId normed) {
  const std::string n = "layers." + std::to_string(layer) + ".";        // node names
  const std::string p = "model.layers." + std::to_string(layer) + ".";  // tensor names
  const std::string i = std::to_string(layer);
  ValueId q, k, v;
  if (c_.architecture == Architecture::kPhi3) {
    // Phi3Attention: qkv[..., :q], qkv[..., q : q + kv], qkv[..., q + kv :].
    const int64_t qw = d_.q_width.size, kvw = d_.kv_width.size;
    ValueId qkv = linear(n + "attn.qkv_proj", normed, p + "self_attn.qkv_proj", false,
                         Dim::fixed(qw + 2 * kvw));
    q = slice(n + "attn.q_slice", qkv, 0, qw);
    k = slice(n + "attn.k_slice", qkv, qw, kvw);
    v = slice(n + "attn.v_slice", qkv, qw + kvw, kvw);
  } else {
    q = linear(n + "attn.q_proj", normed, p + "self_attn.q_proj", c_.qkv_bias, d_.q_width);
    k = linear(n + "attn.k_proj", normed, p + "self_attn.k_proj", c_.qkv_bias, d_.kv_width);
    v = linear(n + "attn.v_proj", normed, p + "self_attn.v_proj", c_.qkv_bias, d_.kv_width);
  }
  if (has_qk_norm(c_.architecture)) {
    q = norm(n + "attn.q_norm", q, p + "self_attn.q_norm.weight", d_.q_width, c_.head_dim);
    k = norm(n + "attn.k_norm", k, p + "self_attn.k_norm.weight", d_.kv_width, c_.head_dim);
  }
  q = w_.node(n + "attn.q_rope", "rope", {q, position_}, {d_.t, d_.q_width},
              rope_attributes(layer, c_.num_attention_heads));
  k = w_.node(n + "attn.k_rope", "rope", {k, position_}, {d_.t, d_.kv_width},
              rope_attributes(layer, c_.num_key_value_heads));
  ValueId k_cache = cache_write(n + "attn.k_cache_write", "k_cache." + i, k);
  ValueId v_cache = cache_write(n + "attn.v_cache_write", "v_cache." + i, v);
  ValueId attended = w_.node(n + "attn.attention", "attention", {q, k_cache, v_cache, position_},
                             {d_.t, d_.q_width}, attention_attributes(layer));
  return linear(n + "attn.o_proj", attended, p + "self_attn.o_proj", c_.o_bias, d_.h);
}

}  // namespace kvrt::frontend::detail
