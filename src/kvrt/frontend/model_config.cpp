#include "kvrt/frontend/model_config.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "kvrt/frontend/family_config.h"
#include "kvrt/frontend/json_fields.h"
#include "kvrt/frontend/rope_config.h"

namespace kvrt::frontend {
namespace {

using nlohmann::json;

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

Status refuse(const JsonFields& fields, std::string_view key, std::string_view why) {
  return fields.error(ErrorCode::kNotSupported, key, why);
}

struct ArchitectureName {
  Architecture architecture;
  std::string_view class_name;  // config.json "architectures"
  std::string_view model_type;
};
constexpr ArchitectureName kArchitectures[] = {
    {Architecture::kLlama, "LlamaForCausalLM", "llama"},
    {Architecture::kQwen2, "Qwen2ForCausalLM", "qwen2"},
    {Architecture::kQwen3, "Qwen3ForCausalLM", "qwen3"},
    {Architecture::kMistral, "MistralForCausalLM", "mistral"},
    {Architecture::kPhi3, "Phi3ForCausalLM", "phi3"},
    {Architecture::kGemma, "GemmaForCausalLM", "gemma"},
    {Architecture::kGemma3, "Gemma3ForCausalLM", "gemma3_text"},
};

std::string supported_list(bool class_names) {
  std::string out;
  for (const ArchitectureName& entry : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += class_names ? entry.class_name : entry.model_type;
  }
  return out;
}

Result<Architecture> read_architecture(const JsonFields& fields) {
  std::optional<Architecture> from_list;
  if (const json* list = fields.get("architectures")) {
    if (!list->is_array() || list->empty()) {
      return fields.error("architectures", "expected a non-empty list of class names");
    }
    for (const json& name : *list) {
      std::optional<Architecture> found;
      for (const ArchitectureName& entry : kArchitectures) {
        if (name == entry.class_name) found = entry.architecture;
      }
      if (!found) {
        return refuse(fields, "architectures",
                      name.dump() + " is not supported (" + supported_list(true) + ")");
      }
      if (from_list && *from_list != *found) return fields.error("architectures", "mixes models");
      from_list = found;
    }
  }
  KVRT_ASSIGN_OR_RETURN(auto model_type, fields.optional_string("model_type"));
  std::optional<Architecture> from_type;
  if (model_type) {
    for (const ArchitectureName& entry : kArchitectures) {
      if (*model_type == entry.model_type) from_type = entry.architecture;
    }
    if (!from_type) {
      return refuse(fields, "model_type",
                    "'" + *model_type + "' is not supported (" + supported_list(false) + ")");
    }
  }
  if (from_list && from_type && *from_list != *from_type) {
    return fields.error("model_type", "'" + *model_type + "' disagrees with architectures");
  }
  if (from_list) return *from_list;
  if (from_type) return *from_type;
  return fields.error("model_type", "missing (and no architectures)");
}

Result<int64_t> read_dim(const JsonFields& fields, std::string_view key) {
  KVRT_ASSIGN_OR_RETURN(int64_t value, fields.positive_int(key));
  if (value > kMaxDim) return fields.error(key, "is implausibly large");
  return value;
}

Result<int64_t> read_dim_or(const JsonFields& fields, std::string_view key, int64_t fallback) {
  if (!fields.has(key)) return fallback;
  return read_dim(fields, key);
}

Result<std::optional<DType>> read_dtype(const JsonFields& fields) {
  for (const char* key : {"dtype", "torch_dtype"}) {  // transformers 5.x, then 4.x
    KVRT_ASSIGN_OR_RETURN(auto name, fields.optional_string(key));
    if (!name) continue;
    if (*name == "float32") return std::optional<DType>(DType::kF32);
    if (*name == "float16") return std::optional<DType>(DType::kF16);
    if (*name == "bfloat16") return std::optional<DType>(DType::kBF16);
    return refuse(fields, key, "'" + *name + "' is not supported (float32, float16, bfloat16)");
  }
  return std::optional<DType>();
}

// Features that change the math of a Llama-family model and that kvrt does not
// implement. A present, non-null, non-false value is refused.
Status refuse_unimplemented(const JsonFields& fields, const ModelConfig& config) {
  const Architecture arch = config.architecture;
  KVRT_ASSIGN_OR_RETURN(auto act, fields.optional_string("hidden_act"));
  // Gemma's modeling code reads hidden_activation, never hidden_act (family_config.cpp).
  if (act && *act != "silu" && *act != "swish" && !is_gemma(arch)) {
    return refuse(fields, "hidden_act", "'" + *act + "' is not supported (silu)");
  }
  KVRT_ASSIGN_OR_RETURN(auto tp, fields.optional_int("pretraining_tp"));
  if (tp && *tp > 1) return refuse(fields, "pretraining_tp", "values above 1 are not supported");
  if (fields.has("quantization_config")) {
    return refuse(fields, "quantization_config", "quantized checkpoints are not supported");
  }
  for (const char* key :
       {"attn_logit_softcapping", "final_logit_softcapping", "embedding_multiplier",
        "logits_scaling", "residual_multiplier", "attention_multiplier", "use_qk_norm",
        "qk_layernorm", "no_rope_layers"}) {
    const json* value = fields.get(key);
    const bool read_by_family =
        arch == Architecture::kGemma3 && std::string_view(key) == "final_logit_softcapping";
    if (value != nullptr && *value != false && !read_by_family) {
      return refuse(fields, key, "is not supported");
    }
  }
  KVRT_ASSIGN_OR_RETURN(auto sliding, fields.optional_bool("use_sliding_window"));
  if (sliding.value_or(false)) {
    return refuse(fields, "use_sliding_window", "sliding-window attention is not supported");
  }
  if ((arch == Architecture::kLlama || arch == Architecture::kGemma) &&
      fields.has("sliding_window")) {
    return refuse(fields, "sliding_window", "sliding-window attention is not supported");
  }
  // Mistral, Phi-3 and Gemma 3 read their layer types with their window (family_config.cpp).
  const bool windowed = arch == Architecture::kMistral || arch == Architecture::kPhi3 ||
                        arch == Architecture::kGemma3;
  if (const json* types = fields.get("layer_types"); types != nullptr && !windowed) {
    if (!types->is_array()) return fields.error("layer_types", "expected a list");
    for (const json& type : *types) {
      if (type != "full_attention") {
        return refuse(fields, "layer_types", type.dump() + " layers are not supported");
      }
    }
  }
  return Status();
}

Status read_biases(const JsonFields& fields, ModelConfig& config) {
  const Architecture arch = config.architecture;
  if (arch == Architecture::kMistral || arch == Architecture::kPhi3) {
    return Status();  // no bias anywhere in their modeling code
  }
  if (arch == Architecture::kQwen3 || is_gemma(arch)) {
    // attention_bias puts a bias on q, k, v and o; the MLP has none.
    KVRT_ASSIGN_OR_RETURN(auto attention_bias, fields.optional_bool("attention_bias"));
    config.qkv_bias = config.o_bias = attention_bias.value_or(false);
    return Status();
  }
  if (arch == Architecture::kQwen2) {
    // Qwen2's modeling code hard-wires these; the checkpoint's tensors are checked
    // against them by the graph builder, which refuses any extra or missing bias.
    config.qkv_bias = true;
    config.o_bias = false;
    config.mlp_bias = false;
    return Status();
  }
  KVRT_ASSIGN_OR_RETURN(auto attention_bias, fields.optional_bool("attention_bias"));
  KVRT_ASSIGN_OR_RETURN(auto mlp_bias, fields.optional_bool("mlp_bias"));
  config.qkv_bias = config.o_bias = attention_bias.value_or(false);
  config.mlp_bias = mlp_bias.value_or(false);
  return Status();
}

// max_position_embeddings when config.json omits it: each config class's default.
int64_t default_positions(Architecture arch) {
  switch (arch) {
    case Architecture::kQwen2:
    case Architecture::kQwen3:
      return 32768;
    case Architecture::kMistral:
    case Architecture::kGemma3:
      return 131072;
    case Architecture::kPhi3:
      return 4096;
    case Architecture::kGemma:
      return 8192;
    case Architecture::kLlama:
      break;
  }
  return 2048;
}

Status read_shapes(const JsonFields& fields, ModelConfig& config) {
  KVRT_ASSIGN_OR_RETURN(config.vocab_size, read_dim(fields, "vocab_size"));
  KVRT_ASSIGN_OR_RETURN(config.hidden_size, read_dim(fields, "hidden_size"));
  KVRT_ASSIGN_OR_RETURN(config.intermediate_size, read_dim(fields, "intermediate_size"));
  KVRT_ASSIGN_OR_RETURN(config.num_hidden_layers, read_dim(fields, "num_hidden_layers"));
  KVRT_ASSIGN_OR_RETURN(config.num_attention_heads, read_dim(fields, "num_attention_heads"));
  KVRT_ASSIGN_OR_RETURN(config.num_key_value_heads,
                        read_dim_or(fields, "num_key_value_heads", config.num_attention_heads));
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    return fields.error("num_key_value_heads",
                        std::to_string(config.num_key_value_heads) + " does not divide " +
                            std::to_string(config.num_attention_heads) + " attention heads");
  }
  // transformers' class defaults: Qwen3Config head_dim 128, Gemma(3) 256.
  const Architecture arch = config.architecture;
  const int64_t default_head_dim = arch == Architecture::kQwen3 ? 128 : is_gemma(arch) ? 256 : 0;
  if (fields.has("head_dim")) {
    KVRT_ASSIGN_OR_RETURN(config.head_dim, read_dim(fields, "head_dim"));
  } else if (default_head_dim > 0) {
    config.head_dim = default_head_dim;
  } else if (config.hidden_size % config.num_attention_heads != 0) {
    return fields.error("num_attention_heads", std::to_string(config.num_attention_heads) +
                                                   " does not divide hidden_size " +
                                                   std::to_string(config.hidden_size) +
                                                   " (and head_dim is not given)");
  } else {
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  if (config.head_dim % 2 != 0) {
    return fields.error("head_dim", "rotary embedding needs an even head_dim, got " +
                                        std::to_string(config.head_dim));
  }
  KVRT_ASSIGN_OR_RETURN(config.max_position_embeddings,
                        read_dim_or(fields, "max_position_embeddings", default_positions(arch)));
  if (arch == Architecture::kPhi3) config.rms_norm_eps = 1e-5;  // Phi3Config's default
  if (fields.has("rms_norm_eps")) {
    KVRT_ASSIGN_OR_RETURN(config.rms_norm_eps, fields.positive_number("rms_norm_eps"));
  }
  KVRT_ASSIGN_OR_RETURN(auto tied, fields.optional_bool("tie_word_embeddings"));
  config.tie_word_embeddings = tied.value_or(is_gemma(arch));
  return Status();
}

}  // namespace

std::string_view architecture_name(Architecture architecture) {
  for (const ArchitectureName& entry : kArchitectures) {
    if (entry.architecture == architecture) return entry.model_type;
  }
  return "llama";
}

bool has_qk_norm(Architecture architecture) {
  return architecture == Architecture::kQwen3 || architecture == Architecture::kGemma3;
}

bool is_gemma(Architecture architecture) {
  return architecture == Architecture::kGemma || architecture == Architecture::kGemma3;
}

json RopeScaling::to_json() const {
  if (type == RopeType::kDefault) return {{"type", "default"}};
  if (type == RopeType::kLinear) return {{"type", "linear"}, {"factor", factor}};
  return {{"type", "llama3"},
          {"factor", factor},
          {"low_freq_factor", low_freq_factor},
          {"high_freq_factor", high_freq_factor},
          {"original_max_position_embeddings", original_max_position_embeddings}};
}

namespace {

// The engines compute in f32: a number that a float cannot hold (rms_norm_eps: 1e308
// becomes inf; 1e-50 becomes 0) would change the math silently.
Status check_fits_float(const JsonFields& fields, std::string_view key, double value) {
  const double magnitude = std::fabs(value);
  const bool fits = std::isfinite(value) && magnitude <= std::numeric_limits<float>::max() &&
                    (value == 0 || static_cast<float>(magnitude) > 0.0f);
  if (fits) return Status();
  std::ostringstream text;
  text << value << " does not fit a float (the engines compute in f32)";
  return fields.error(key, text.str());
}

Status check_float_fields(const JsonFields& fields, const ModelConfig& config) {
  KVRT_RETURN_IF_ERROR(check_fits_float(fields, "rms_norm_eps", config.rms_norm_eps));
  KVRT_RETURN_IF_ERROR(check_fits_float(fields, "rope_theta", config.rope_theta));
  KVRT_RETURN_IF_ERROR(check_fits_float(fields, "rope_local_base_freq", config.local_rope_theta));
  KVRT_RETURN_IF_ERROR(
      check_fits_float(fields, "partial_rotary_factor", config.partial_rotary_factor));
  for (const RopeScaling* scaling : {&config.rope_scaling, &config.local_rope_scaling}) {
    KVRT_RETURN_IF_ERROR(check_fits_float(fields, "rope_scaling.factor", scaling->factor));
    KVRT_RETURN_IF_ERROR(
        check_fits_float(fields, "rope_scaling.low_freq_factor", scaling->low_freq_factor));
    KVRT_RETURN_IF_ERROR(
        check_fits_float(fields, "rope_scaling.high_freq_factor", scaling->high_freq_factor));
  }
  if (config.query_pre_attn_scalar) {
    KVRT_RETURN_IF_ERROR(
        check_fits_float(fields, "query_pre_attn_scalar", *config.query_pre_attn_scalar));
  }
  if (config.final_logit_softcapping) {
    KVRT_RETURN_IF_ERROR(
        check_fits_float(fields, "final_logit_softcapping", *config.final_logit_softcapping));
  }
  return Status();
}

// A special token outside the vocabulary could never be produced (EOS never stops
// generation) or would index past the embedding table (BOS).
Status check_token_ids(const JsonFields& fields, const ModelConfig& config) {
  auto check = [&](std::string_view key, int64_t id) {
    if (id >= 0 && id < config.vocab_size) return Status();
    return fields.error(key, "token id " + std::to_string(id) + " is outside the vocabulary (" +
                                 std::to_string(config.vocab_size) + " tokens)");
  };
  if (config.bos_token_id) KVRT_RETURN_IF_ERROR(check("bos_token_id", *config.bos_token_id));
  for (int64_t id : config.eos_token_ids) KVRT_RETURN_IF_ERROR(check("eos_token_id", id));
  return Status();
}

}  // namespace

Result<ModelConfig> parse_model_config(const json& root, const std::string& source) {
  if (!root.is_object()) return invalid_argument(source, ": expected a JSON object");
  try {
    JsonFields fields(root, source);
    ModelConfig config;
    KVRT_ASSIGN_OR_RETURN(config.architecture, read_architecture(fields));
    KVRT_RETURN_IF_ERROR(refuse_unimplemented(fields, config));
    KVRT_RETURN_IF_ERROR(read_shapes(fields, config));
    KVRT_RETURN_IF_ERROR(read_biases(fields, config));
    KVRT_RETURN_IF_ERROR(read_rope(fields, config));
    KVRT_RETURN_IF_ERROR(read_family_fields(fields, config));
    KVRT_ASSIGN_OR_RETURN(config.dtype, read_dtype(fields));
    KVRT_ASSIGN_OR_RETURN(config.bos_token_id, fields.optional_int("bos_token_id"));
    KVRT_ASSIGN_OR_RETURN(config.eos_token_ids, fields.token_ids("eos_token_id"));
    KVRT_RETURN_IF_ERROR(check_float_fields(fields, config));
    KVRT_RETURN_IF_ERROR(check_token_ids(fields, config));
    return config;
  } catch (const json::exception& error) {  // defensive: fields are type-checked first
    return invalid_argument(source, ": ", error.what());
  }
}

Result<ModelConfig> load_model_config(const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(json root, read_json_file(path));
  return parse_model_config(root, path);
}

}  // namespace kvrt::frontend
