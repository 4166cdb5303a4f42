// The checkpoint tensors a config implies (every architecture of model_config.h), with
// their shapes, and the check that a checkpoint holds exactly those (names as Hugging
// Face writes them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/frontend/model_config.h"
#include "kvrt/frontend/weight_index.h"

namespace kvrt::frontend {

struct ExpectedTensor {
  std::string name;  // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
};

// Embedding, per layer (norms, q/k/v/o, gate/up/down, biases the config asks for; Phi-3's
// fused qkv_proj and gate_up_proj; Qwen3/Gemma 3 q_norm, k_norm; Gemma 3's pre/post
// feed-forward norms), final norm, and lm_head.weight unless the embeddings are tied.
std::vector<ExpectedTensor> expected_llama_tensors(const ModelConfig& config);

// Every expected tensor exists with the expected shape and a floating dtype (f32, f16,
// bf16); the checkpoint holds nothing else. Errors name the tensor and both shapes.
// Tolerated extras: "*.rotary_emb.inv_freq" (old checkpoints saved this derived
// buffer) and, with tied embeddings, an lm_head.weight byte-identical to the table.
Status check_llama_weights(const ModelConfig& config, const WeightIndex& weights);

}  // namespace kvrt::frontend
