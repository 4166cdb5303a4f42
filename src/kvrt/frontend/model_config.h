// The model hyperparameters kvrt reads from a Hugging Face config.json, for the two
// architectures it implements (LlamaForCausalLM, Qwen2ForCausalLM). Anything in the
// file that would change the math and that kvrt does not implement is refused with
// an error naming the field; nothing is silently ignored.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"

namespace kvrt::frontend {

enum class Architecture : uint8_t { kLlama, kQwen2 };
// "llama" or "qwen2" (the model_type spelling).
std::string_view architecture_name(Architecture architecture);

enum class RopeType : uint8_t { kDefault, kLlama3 };

// RoPE frequency scaling. Only kLlama3 uses the other fields.
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;

  // The `scaling` attribute of the rope op (docs/graph.md): {"type": "default"} or
  // {"type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
  //  "original_max_position_embeddings"}.
  nlohmann::json to_json() const;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  // Llama: attention_bias puts a bias on q, k, v and o; mlp_bias on gate, up, down.
  // Qwen2: q, k, v always have a bias; o and the MLP never do.
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  std::optional<DType> dtype;  // torch_dtype / dtype: the checkpoint's storage dtype
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
};

// Parses a config.json object. `source` (the file path) prefixes every error.
// Missing optional fields take transformers' defaults for the architecture. Refused:
// other architectures/model types, hidden_act other than silu, rope types other than
// default and llama3, partial rotary factors, Qwen2 sliding window (use_sliding_window
// true, or layer_types other than full_attention), pretraining_tp > 1,
// quantization_config, and inconsistent shapes (heads not dividing, odd head_dim).
Result<ModelConfig> parse_model_config(const nlohmann::json& json, const std::string& source);
Result<ModelConfig> load_model_config(const std::string& path);

}  // namespace kvrt::frontend
