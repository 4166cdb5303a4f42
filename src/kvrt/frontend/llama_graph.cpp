#include "kvrt/frontend/llama_graph.h"

#include <cmath>
#include <string>

#include "kvrt/frontend/decoder_builder.h"
#include "kvrt/frontend/llama_weights.h"

namespace kvrt::frontend {
namespace {

using graph::Dim;
using graph::ValueId;
using graph::ValueKind;
using nlohmann::json;

using detail::DecoderBuilder;
using detail::Dims;

}  // namespace

namespace detail {

graph::Graph DecoderBuilder::build() {
  ValueId tokens = w_.input("tokens", DType::kI32, {Dim::fixed(1), d_.t});
  position_ = w_.input("position", DType::kI32, {Dim::fixed(1)});
  ValueId x = w_.node("embed_tokens", "embedding", {tokens, w_.param("model.embed_tokens.weight")},
                      {d_.t, d_.h});
  const bool gemma = is_gemma(c_.architecture);
  if (gemma) {
    // HF multiplies by sqrt(hidden_size) as a tensor of the activations' dtype: f32 here,
    // as in transformers' float32 run.
    x = w_.node("embed_scale", "scale", {x}, {d_.t, d_.h},
                {{"factor", std::sqrt(static_cast<double>(c_.hidden_size))}});
  }
  for (int64_t layer = 0; layer < c_.num_hidden_layers; ++layer) {
    x = gemma ? gemma_layer(layer, x) : llama_layer(layer, x);
  }
  x = norm("final_norm", x, "model.norm.weight", d_.h);
  x = w_.node("take_last", "take_last", {x}, {Dim::fixed(1), d_.h});
  const char* head = c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  const std::vector<Dim> logits_shape = {Dim::fixed(1), Dim::fixed(c_.vocab_size)};
  const bool capped = c_.final_logit_softcapping.has_value();
  ValueId logits = w_.node("lm_head", "linear", {x, w_.param(head)}, logits_shape, json::object(),
                           capped ? "lm_head" : "logits");
  if (capped) {
    logits = w_.node("logit_softcap", "softcap", {logits}, logits_shape,
                     {{"cap", *c_.final_logit_softcapping}}, "logits");
  }
  w_.graph().outputs.push_back(logits);
  // The greedy choice, made where the logits are: on a device only its id needs to
  // reach the host, and the next decode step can read it where it lies.
  ValueId next = w_.node("next_token", "argmax", {logits}, {Dim::fixed(1), Dim::fixed(1)},
                         json::object(), "next_token", DType::kI32);
  w_.graph().outputs.push_back(next);
  return std::move(w_.graph());
}

// Llama, Qwen2, Qwen3, Mistral, Phi-3: pre-norm attention and SwiGLU blocks.
graph::ValueId DecoderBuilder::llama_layer(int64_t layer, ValueId x) {
  const std::string n = "layers." + std::to_string(layer) + ".";        // node names
  const std::string p = "model.layers." + std::to_string(layer) + ".";  // tensor names
  // Attention block: [T, H] -> [T, H].
  ValueId normed = norm(n + "input_norm", x, p + "input_layernorm.weight", d_.h);
  ValueId o = attention_block(layer, normed);
  x = w_.node(n + "attn.residual", "add", {x, o}, {d_.t, d_.h});
  // MLP block: [T, H] -> [T, I] -> [T, H].
  normed = norm(n + "post_attention_norm", x, p + "post_attention_layernorm.weight", d_.h);
  ValueId gate, up;
  if (c_.architecture == Architecture::kPhi3) {
    // Phi3MLP: gate, up = gate_up_proj(x).chunk(2, dim=-1).
    const int64_t width = d_.mlp.size;
    ValueId fused = linear(n + "mlp.gate_up_proj", normed, p + "mlp.gate_up_proj", c_.mlp_bias,
                           Dim::fixed(2 * width));
    gate = slice(n + "mlp.gate_slice", fused, 0, width);
    up = slice(n + "mlp.up_slice", fused, width, width);
  } else {
    gate = linear(n + "mlp.gate_proj", normed, p + "mlp.gate_proj", c_.mlp_bias, d_.mlp);
    up = linear(n + "mlp.up_proj", normed, p + "mlp.up_proj", c_.mlp_bias, d_.mlp);
  }
  ValueId act = w_.node(n + "mlp.silu_mul", "silu_mul", {gate, up}, {d_.t, d_.mlp});
  ValueId down = linear(n + "mlp.down_proj", act, p + "mlp.down_proj", c_.mlp_bias, d_.h);
  return w_.node(n + "mlp.residual", "add", {x, down}, {d_.t, d_.h});
}

}  // namespace detail

namespace {

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
  graph::Graph graph = DecoderBuilder(config, weights, options, std::move(dims)).build();
  Status valid = graph.validate();
  if (!valid.ok()) return internal_error("built an invalid graph: ", valid.message());
  return graph;
}

}  // namespace kvrt::frontend
