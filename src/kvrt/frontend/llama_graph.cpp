#include "kvrt/frontend/llama_graph.h"

#include <cmath>
#include <string>
#include <unordered_map>

#include "kvrt/frontend/llama_weights.h"

namespace kvrt::frontend {
namespace {

using graph::Dim;
using graph::ValueId;
using graph::ValueKind;
using nlohmann::json;

// Appends values and nodes; parameters come from the weight index (stored dtype and
// shape), added once each however often they are used.
class GraphWriter {
 public:
  explicit GraphWriter(const WeightIndex& weights) : weights_(weights) {}

  ValueId input(std::string name, DType dtype, std::vector<Dim> shape) {
    ValueId id = graph_.add_value({std::move(name), dtype, std::move(shape), ValueKind::kInput});
    graph_.inputs.push_back(id);
    return id;
  }
  ValueId buffer(std::string name, DType dtype, std::vector<Dim> shape) {
    return graph_.add_value({std::move(name), dtype, std::move(shape), ValueKind::kBuffer});
  }
  ValueId param(const std::string& name) {
    auto known = params_.find(name);
    if (known != params_.end()) return known->second;
    const TensorRecord& record = weights_.find(name)->record;  // checked before building
    std::vector<Dim> shape;
    for (int64_t d : record.shape) shape.push_back(Dim::fixed(d));
    ValueId id = graph_.add_value({name, record.dtype, std::move(shape), ValueKind::kParameter});
    params_.emplace(name, id);
    return id;
  }
  // One node with one new f32 (or `dtype`) output value named `value_name`.
  ValueId node(const std::string& name, const char* op, std::vector<ValueId> inputs,
               std::vector<Dim> shape, json attributes = json::object(),
               const std::string& value_name = "", DType dtype = DType::kF32) {
    ValueId out = graph_.add_value({value_name.empty() ? name : value_name, dtype, std::move(shape),
                                    ValueKind::kIntermediate});
    graph_.nodes.push_back({name, op, std::move(inputs), {out}, std::move(attributes)});
    return out;
  }
  graph::Graph& graph() { return graph_; }

 private:
  const WeightIndex& weights_;
  graph::Graph graph_;
  std::unordered_map<std::string, ValueId> params_;
};

struct Dims {
  Dim t;  // tokens in this call
  Dim h, q_width, kv_width, mlp;
  int64_t max_seq = 0;
};

class LlamaBuilder {
 public:
  LlamaBuilder(const ModelConfig& config, const WeightIndex& weights, const BuildOptions& options,
               Dims dims)
      : c_(config), options_(options), d_(std::move(dims)), w_(weights) {}

  graph::Graph build() {
    ValueId tokens = w_.input("tokens", DType::kI32, {Dim::fixed(1), d_.t});
    position_ = w_.input("position", DType::kI32, {Dim::fixed(1)});
    ValueId x = w_.node("embed_tokens", "embedding",
                        {tokens, w_.param("model.embed_tokens.weight")}, {d_.t, d_.h});
    for (int64_t layer = 0; layer < c_.num_hidden_layers; ++layer) x = decoder_layer(layer, x);
    x = w_.node("final_norm", "rms_norm", {x, w_.param("model.norm.weight")}, {d_.t, d_.h},
                {{"eps", c_.rms_norm_eps}});
    x = w_.node("take_last", "take_last", {x}, {Dim::fixed(1), d_.h});
    const char* head = c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    ValueId logits = w_.node("lm_head", "linear", {x, w_.param(head)},
                             {Dim::fixed(1), Dim::fixed(c_.vocab_size)}, json::object(), "logits");
    w_.graph().outputs.push_back(logits);
    // The greedy choice, made where the logits are: on a device only its id needs to
    // reach the host, and the next decode step can read it where it lies.
    ValueId next = w_.node("next_token", "argmax", {logits}, {Dim::fixed(1), Dim::fixed(1)},
                           json::object(), "next_token", DType::kI32);
    w_.graph().outputs.push_back(next);
    return std::move(w_.graph());
  }

 private:
  // x · weightᵀ (+ bias when the config has one): [T, K] -> [T, N].
  ValueId linear(const std::string& node, ValueId x, const std::string& weight, bool bias, Dim n) {
    std::vector<ValueId> inputs = {x, w_.param(weight + ".weight")};
    if (bias) inputs.push_back(w_.param(weight + ".bias"));
    return w_.node(node, "linear", std::move(inputs), {d_.t, n});
  }

  json rope_attributes(int64_t heads) const {
    return {{"num_heads", heads},
            {"head_dim", c_.head_dim},
            {"theta", c_.rope_theta},
            {"scaling", c_.rope_scaling.to_json()}};
  }

  // Writes `rows` [T, KVH·D] into cache buffer `name` at `position`; returns the
  // updated cache value and records the mutation.
  ValueId cache_write(const std::string& node, const std::string& name, ValueId rows) {
    const std::vector<Dim> shape = {Dim::fixed(c_.num_key_value_heads), Dim::fixed(d_.max_seq),
                                    Dim::fixed(c_.head_dim)};
    ValueId cache = w_.buffer(name, options_.cache_dtype, shape);
    ValueId updated = w_.node(node, "kv_cache_write", {cache, rows, position_}, shape,
                              json::object(), name + ".updated", options_.cache_dtype);
    w_.graph().mutations.push_back({cache, updated});
    return updated;
  }

  ValueId decoder_layer(int64_t layer, ValueId x) {
    const std::string n = "layers." + std::to_string(layer) + ".";        // node names
    const std::string p = "model.layers." + std::to_string(layer) + ".";  // tensor names
    const std::string i = std::to_string(layer);
    // Attention block: [T, H] -> [T, H].
    ValueId normed =
        w_.node(n + "input_norm", "rms_norm", {x, w_.param(p + "input_layernorm.weight")},
                {d_.t, d_.h}, {{"eps", c_.rms_norm_eps}});
    ValueId q = linear(n + "attn.q_proj", normed, p + "self_attn.q_proj", c_.qkv_bias, d_.q_width);
    ValueId k = linear(n + "attn.k_proj", normed, p + "self_attn.k_proj", c_.qkv_bias, d_.kv_width);
    ValueId v = linear(n + "attn.v_proj", normed, p + "self_attn.v_proj", c_.qkv_bias, d_.kv_width);
    q = w_.node(n + "attn.q_rope", "rope", {q, position_}, {d_.t, d_.q_width},
                rope_attributes(c_.num_attention_heads));
    k = w_.node(n + "attn.k_rope", "rope", {k, position_}, {d_.t, d_.kv_width},
                rope_attributes(c_.num_key_value_heads));
    ValueId k_cache = cache_write(n + "attn.k_cache_write", "k_cache." + i, k);
    ValueId v_cache = cache_write(n + "attn.v_cache_write", "v_cache." + i, v);
    ValueId attended = w_.node(n + "attn.attention", "attention", {q, k_cache, v_cache, position_},
                               {d_.t, d_.q_width},
                               {{"num_heads", c_.num_attention_heads},
                                {"num_kv_heads", c_.num_key_value_heads},
                                {"head_dim", c_.head_dim},
                                {"scale", 1.0 / std::sqrt(static_cast<double>(c_.head_dim))}});
    ValueId o = linear(n + "attn.o_proj", attended, p + "self_attn.o_proj", c_.o_bias, d_.h);
    x = w_.node(n + "attn.residual", "add", {x, o}, {d_.t, d_.h});
    // MLP block: [T, H] -> [T, I] -> [T, H].
    normed = w_.node(n + "post_attention_norm", "rms_norm",
                     {x, w_.param(p + "post_attention_layernorm.weight")}, {d_.t, d_.h},
                     {{"eps", c_.rms_norm_eps}});
    ValueId gate = linear(n + "mlp.gate_proj", normed, p + "mlp.gate_proj", c_.mlp_bias, d_.mlp);
    ValueId up = linear(n + "mlp.up_proj", normed, p + "mlp.up_proj", c_.mlp_bias, d_.mlp);
    ValueId act = w_.node(n + "mlp.silu_mul", "silu_mul", {gate, up}, {d_.t, d_.mlp});
    ValueId down = linear(n + "mlp.down_proj", act, p + "mlp.down_proj", c_.mlp_bias, d_.h);
    return w_.node(n + "mlp.residual", "add", {x, down}, {d_.t, d_.h});
  }

  const ModelConfig& c_;
  const BuildOptions& options_;
  Dims d_;
  GraphWriter w_;
  ValueId position_ = -1;
};

Result<Dims> resolve_dims(const ModelConfig& config, const BuildOptions& options) {
  Dims dims;
  dims.max_seq = options.max_seq > 0 ? options.max_seq : default_max_seq(config);
  if (options.max_seq < 0 || dims.max_seq > config.max_position_embeddings) {
    return invalid_argument("max_seq ", options.max_seq, " is outside 1..",
                            config.max_position_embeddings, " (max_position_embeddings)");
  }
  const int64_t max_prompt = options.max_prompt > 0 ? options.max_prompt : dims.max_seq;
  if (options.max_prompt < 0 || max_prompt > dims.max_seq) {
    return invalid_argument("max_prompt ", options.max_prompt, " is outside 1..", dims.max_seq,
                            " (max_seq)");
  }
  if (!is_floating(options.cache_dtype)) {
    return invalid_argument("cache dtype ", dtype_name(options.cache_dtype),
                            " is not supported (f32, f16, bf16)");
  }
  dims.t = options.method == MethodKind::kDecode ? Dim::fixed(1) : Dim::dynamic("T", 1, max_prompt);
  dims.h = Dim::fixed(config.hidden_size);
  dims.q_width = Dim::fixed(config.num_attention_heads * config.head_dim);
  dims.kv_width = Dim::fixed(config.num_key_value_heads * config.head_dim);
  dims.mlp = Dim::fixed(config.intermediate_size);
  return dims;
}

}  // namespace

std::string_view method_name(MethodKind kind) {
  return kind == MethodKind::kDecode ? "decode" : "prefill";
}

int64_t default_max_seq(const ModelConfig& config) {
  return std::min<int64_t>(config.max_position_embeddings, 2048);
}

Result<graph::Graph> build_llama_graph(const ModelConfig& config, const WeightIndex& weights,
                                       const BuildOptions& options) {
  KVRT_RETURN_IF_ERROR(check_llama_weights(config, weights));
  KVRT_ASSIGN_OR_RETURN(Dims dims, resolve_dims(config, options));
  graph::Graph graph = LlamaBuilder(config, weights, options, std::move(dims)).build();
  Status valid = graph.validate();
  if (!valid.ok()) return internal_error("built an invalid graph: ", valid.message());
  return graph;
}

}  // namespace kvrt::frontend
