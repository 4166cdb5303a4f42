#include "kvrt/frontend/family_config.h"

#include <string>

namespace kvrt::frontend {
namespace {

using nlohmann::json;

Status read_activation(const JsonFields& fields, ModelConfig& config) {
  if (!is_gemma(config.architecture)) return Status();
  // GemmaMLP: ACT2FN[hidden_activation], gelu_pytorch_tanh when it is null (hidden_act
  // is ignored there).
  KVRT_ASSIGN_OR_RETURN(auto act, fields.optional_string("hidden_activation"));
  if (act && *act != "gelu_pytorch_tanh") {
    return fields.error(ErrorCode::kNotSupported, "hidden_activation",
                        "'" + *act + "' is not supported (gelu_pytorch_tanh)");
  }
  config.activation = Activation::kGeluTanh;
  return Status();
}

Status read_rotary_dim(const JsonFields& fields, ModelConfig& config) {
  // Phi3RotaryEmbedding: dim = int(head_dim * partial_rotary_factor).
  config.rotary_dim =
      static_cast<int64_t>(static_cast<double>(config.head_dim) * config.partial_rotary_factor);
  if (config.rotary_dim < 2 || config.rotary_dim % 2 != 0) {
    return fields.error("partial_rotary_factor",
                        "gives rotary dim " + std::to_string(config.rotary_dim) + " of head_dim " +
                            std::to_string(config.head_dim) + "; it must be even and at least 2");
  }
  return Status();
}

// layer_types as HF writes them; each entry "full_attention" or "sliding_attention".
Result<std::vector<bool>> read_layer_types(const JsonFields& fields, int64_t layers) {
  const json* types = fields.get("layer_types");
  std::vector<bool> sliding;
  if (types == nullptr) return sliding;
  if (!types->is_array() || static_cast<int64_t>(types->size()) != layers) {
    return fields.error("layer_types", "expected a list of num_hidden_layers (" +
                                           std::to_string(layers) + ") layer types");
  }
  for (const json& type : *types) {
    const std::string name = type.is_string() ? type.get<std::string>() : std::string();
    if (name != "full_attention" && name != "sliding_attention") {
      return fields.error(ErrorCode::kNotSupported, "layer_types",
                          type.dump() + " layers are not supported");
    }
    sliding.push_back(name == "sliding_attention");
  }
  return sliding;
}

// Mistral and Phi-3: one window for every layer (their masks use config.sliding_window
// alone); null means full attention.
Status read_uniform_window(const JsonFields& fields, ModelConfig& config) {
  if (fields.has("sliding_window")) {
    KVRT_ASSIGN_OR_RETURN(int64_t window, fields.positive_int("sliding_window"));
    config.sliding_window = window;
    config.sliding_layers.assign(static_cast<size_t>(config.num_hidden_layers), true);
  }
  KVRT_ASSIGN_OR_RETURN(std::vector<bool> types,
                        read_layer_types(fields, config.num_hidden_layers));
  const std::vector<bool> expected(static_cast<size_t>(config.num_hidden_layers),
                                   config.sliding_window.has_value());
  if (!types.empty() && types != expected) {
    return fields.error(ErrorCode::kNotSupported, "layer_types",
                        "disagrees with sliding_window (this architecture applies one window "
                        "to every layer)");
  }
  return Status();
}

Status read_gemma3(const JsonFields& fields, ModelConfig& config) {
  KVRT_ASSIGN_OR_RETURN(auto bidirectional, fields.optional_bool("use_bidirectional_attention"));
  if (bidirectional.value_or(false)) {
    return fields.error(ErrorCode::kNotSupported, "use_bidirectional_attention",
                        "bidirectional attention is not supported");
  }
  // Gemma3TextConfig defaults: sliding_window 4096, pattern 6 (every 6th layer global).
  int64_t window = 4096;
  if (fields.has("sliding_window")) {
    KVRT_ASSIGN_OR_RETURN(window, fields.positive_int("sliding_window"));
  }
  KVRT_ASSIGN_OR_RETURN(config.sliding_layers, read_layer_types(fields, config.num_hidden_layers));
  if (config.sliding_layers.empty()) {
    int64_t pattern = 6;
    if (fields.has("sliding_window_pattern")) {
      KVRT_ASSIGN_OR_RETURN(pattern, fields.positive_int("sliding_window_pattern"));
    }
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      config.sliding_layers.push_back((i + 1) % pattern != 0);
    }
  }
  config.sliding_window = window;
  double scalar = 256.0;
  if (fields.has("query_pre_attn_scalar")) {
    KVRT_ASSIGN_OR_RETURN(scalar, fields.positive_number("query_pre_attn_scalar"));
  }
  config.query_pre_attn_scalar = scalar;
  if (fields.has("final_logit_softcapping")) {
    KVRT_ASSIGN_OR_RETURN(double cap, fields.positive_number("final_logit_softcapping"));
    config.final_logit_softcapping = cap;
  }
  return Status();
}

}  // namespace

Status read_family_fields(const JsonFields& fields, ModelConfig& config) {
  KVRT_RETURN_IF_ERROR(read_activation(fields, config));
  KVRT_RETURN_IF_ERROR(read_rotary_dim(fields, config));
  switch (config.architecture) {
    case Architecture::kMistral:
    case Architecture::kPhi3:
      return read_uniform_window(fields, config);
    case Architecture::kGemma3:
      return read_gemma3(fields, config);
    default:
      return Status();
  }
}

}  // namespace kvrt::frontend
