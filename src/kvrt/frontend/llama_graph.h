// Builds the graph IR of one method (prefill or decode) of a decoder-only model of any
// architecture in model_config.h (Llama 2/3/3.1/3.2, Qwen2, Qwen3, Mistral, Phi-3, Gemma,
// Gemma 3 text) from its config and checkpoint index. The op vocabulary and shapes are
// those of docs/graph.md; the layout of the result is in docs/frontend.md.
#pragma once

#include <cstdint>
#include <string_view>

#include "kvrt/core/result.h"
#include "kvrt/frontend/model_config.h"
#include "kvrt/frontend/weight_index.h"
#include "kvrt/graph/graph.h"

namespace kvrt::frontend {

enum class MethodKind : uint8_t {
  kPrefill,  // tokens [1, T], T dynamic in 1..max_prompt
  kDecode,   // tokens [1, 1]
};
// "prefill" / "decode": the method names in the program file.
std::string_view method_name(MethodKind kind);

struct BuildOptions {
  MethodKind method = MethodKind::kPrefill;
  int64_t max_seq = 0;              // cache capacity S; 0 means default_max_seq(config)
  int64_t max_prompt = 0;           // prefill's largest T; 0 means max_seq
  DType cache_dtype = DType::kF32;  // f32, f16 or bf16
};

// min(max_position_embeddings, 2048).
int64_t default_max_seq(const ModelConfig& config);

// Checks the weights (check_llama_weights) and the options (max_seq in
// 1..max_position_embeddings, max_prompt in 1..max_seq, floating cache dtype), then
// builds and validates the graph:
//   inputs   tokens i32 [1, T], position i32 [1]
//   params   checkpoint tensors by their names (dtype and shape as stored)
//   buffers  k_cache.{i}, v_cache.{i}: cache_dtype [KVH, S, D]
//   output   logits f32 [1, V]
//   one mutation per kv_cache_write ({k,v}_cache.{i} <- {k,v}_cache.{i}.updated)
// Nodes (Llama, Qwen2, Mistral): embed_tokens; per layer 17 (layers.{i}.input_norm,
// .attn.{q,k,v}_proj, .attn.{q,k}_rope, .attn.{k,v}_cache_write, .attn.attention,
// .attn.o_proj, .attn.residual, .post_attention_norm, .mlp.{gate,up}_proj,
// .mlp.silu_mul, .mlp.down_proj, .mlp.residual); final_norm, take_last, lm_head.
// The other families add or replace nodes per layer:
//   Qwen3    + .attn.{q,k}_norm (per-head rms_norm)                          19
//   Phi-3    .attn.qkv_proj + .attn.{q,k,v}_slice, .mlp.gate_up_proj +
//            .mlp.{gate,up}_slice instead of the separate projections        19
//   Gemma    .mlp.gelu_mul (gelu_tanh_mul) instead of silu_mul; embed_scale
//            after embed_tokens                                              17
//   Gemma 3  as Gemma, + .attn.{q,k}_norm, .attn.post_norm, .mlp.post_norm,
//            and .pre_mlp_norm instead of .post_attention_norm;
//            logit_softcap after lm_head when final_logit_softcapping is set 21
// Sliding layers' attention nodes carry `window` when it is shorter than max_seq.
Result<graph::Graph> build_llama_graph(const ModelConfig& config, const WeightIndex& weights,
                                       const BuildOptions& options);

}  // namespace kvrt::frontend
