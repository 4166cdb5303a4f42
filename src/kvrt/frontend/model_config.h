// The model hyperparameters kvrt reads from a Hugging Face config.json, for the
// architectures it implements (Llama, Qwen2, Qwen3, Mistral, Phi-3, Gemma, Gemma 3 text).
// Anything in the file that would change the math and that kvrt does not implement is
// refused with an error naming the field; nothing is silently ignored.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"

namespace kvrt::frontend {

enum class Architecture : uint8_t { kLlama, kQwen2, kQwen3, kMistral, kPhi3, kGemma, kGemma3 };
// The model_type spelling: "llama", "qwen2", "qwen3", "mistral", "phi3", "gemma",
// "gemma3_text".
std::string_view architecture_name(Architecture architecture);
// Qwen3 and Gemma 3 RMS-normalize each query and key head before rotary (q_norm, k_norm).
bool has_qk_norm(Architecture architecture);
// Gemma and Gemma 3: (1 + w) norms, embeddings scaled by sqrt(hidden), GeGLU.
bool is_gemma(Architecture architecture);

enum class RopeType : uint8_t { kDefault, kLlama3, kLinear };

// The MLP's gate activation: SwiGLU (silu) or GeGLU (gelu_pytorch_tanh).
enum class Activation : uint8_t { kSilu, kGeluTanh };

// RoPE frequency scaling. kLlama3 uses every field, kLinear only `factor`.
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;

  // The `scaling` attribute of the rope op (docs/graph.md): {"type": "default"},
  // {"type": "linear", "factor"} or {"type": "llama3", "factor", "low_freq_factor",
  // "high_freq_factor", "original_max_position_embeddings"}.
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

  // What the other families add (defaults keep a Llama/Qwen2 config unchanged).
  Activation activation = Activation::kSilu;
  // Phi-3: rotary embedding on the first rotary_dim = int(head_dim *
  // partial_rotary_factor) dims of each head; head_dim everywhere else.
  double partial_rotary_factor = 1.0;
  int64_t rotary_dim = 0;
  // Sliding-window attention (Mistral, Phi-3: every layer; Gemma 3: its local layers).
  // sliding_layers[i] says whether layer i is limited to the last `sliding_window`
  // positions; empty when no layer is.
  std::optional<int64_t> sliding_window;
  std::vector<bool> sliding_layers;
  // Gemma 3's sliding layers rotate with their own base (rope_local_base_freq).
  double local_rope_theta = 10000.0;
  RopeScaling local_rope_scaling;
  // Gemma 3: attention scores scaled by query_pre_attn_scalar^-0.5 (head_dim^-0.5
  // otherwise), and logits soft-capped as tanh(x / cap) * cap when set.
  std::optional<double> query_pre_attn_scalar;
  std::optional<double> final_logit_softcapping;
};

// Parses a config.json object. `source` (the file path) prefixes every error.
// Missing optional fields take transformers' defaults for the architecture. Refused:
// other architectures/model types, hidden_act other than silu (hidden_activation other
// than gelu_pytorch_tanh for Gemma), rope types other than default, linear and llama3
// (longrope, su, yarn, dynamic: named), partial rotary factors outside Phi-3, Qwen2/Qwen3
// sliding window (use_sliding_window true, or layer_types other than full_attention),
// Llama/Gemma sliding_window, attention logit soft-capping, Gemma 3 bidirectional
// attention, pretraining_tp > 1, quantization_config, and inconsistent shapes (heads not
// dividing, odd head_dim or rotary dim).
Result<ModelConfig> parse_model_config(const nlohmann::json& json, const std::string& source);
Result<ModelConfig> load_model_config(const std::string& path);

}  // namespace kvrt::frontend
