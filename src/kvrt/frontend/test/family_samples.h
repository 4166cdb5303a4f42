// config.json contents of published checkpoints of the families beyond Llama and Qwen2,
// field by field, shared by the frontend's family tests.
#pragma once

#include <nlohmann/json.hpp>

namespace kvrt::frontend::testing::samples {

inline nlohmann::json qwen3_0_6b() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
}

inline nlohmann::json mistral_7b_v01() {
  return nlohmann::json::parse(R"({
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
    "vocab_size": 32000})");
}

inline nlohmann::json phi3_mini_4k() {
  return nlohmann::json::parse(R"({
    "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
    "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
    "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "use_cache": true, "vocab_size": 32064})");
}

// Phi-4-mini's shape (partial rotary 0.75, GQA, tied) with its longrope scaling.
inline nlohmann::json phi4_mini() {
  return nlohmann::json::parse(R"({
    "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 199999,
    "eos_token_id": 199999, "hidden_act": "silu", "hidden_size": 3072,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "model_type": "phi3",
    "num_attention_heads": 24, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.75,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"long_factor": [1.0, 1.1], "short_factor": [1.0, 1.0], "type": "longrope"},
    "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "vocab_size": 200064})");
}

inline nlohmann::json gemma_2b() {
  return nlohmann::json::parse(R"({
    "architectures": ["GemmaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 16384, "max_position_embeddings": 8192, "model_type": "gemma",
    "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1,
    "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 256000})");
}

inline nlohmann::json gemma3_1b() {
  return nlohmann::json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid",
    "eos_token_id": [1, 106], "final_logit_softcapping": null, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
    "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
    "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
    "use_cache": true, "vocab_size": 262144})");
}

}  // namespace kvrt::frontend::testing::samples
