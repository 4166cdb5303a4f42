// The CUDA engine's launch plan, compiled once from a partition subgraph: the graph's
// nodes matched, by dataflow, to the decoder pattern the kernel library runs
// (docs/cuda-engine.md, docs/cuda-families.md). Plain C++ (no CUDA), so the matcher and
// its refusals are tested on machines without a GPU.
//
//   embedding (─► scale) ─► per layer:
//     norm ─► q,k,v linear (+bias) | qkv linear ─► 3 slices ─► (q/k head norms) ─►
//     rope q,k ─► kv_cache_write k,v ─► attention (window) ─► o linear (─► norm) ─► add ─►
//     norm ─► gate,up linear | gate_up linear ─► 2 slices ─► silu_mul | gelu_tanh_mul ─►
//     down linear (─► norm) ─► add
//   ─► norm ─► take_last ─► lm_head linear (─► softcap) (─► argmax: the greedy token)
//
// Llama, Qwen2, Qwen3, Mistral, Phi-3, Gemma and Gemma 3 graphs fit it. Anything else (an
// op, a node outside the pattern, a dtype or shape the kernels do not run) is
// NotSupported naming the node or value, never run wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/graph/graph.h"

namespace kvrt::engine::cuda {

// A linear layer's weight and optional bias: parameter names ("" for no bias).
struct LinearWeights {
  std::string weight;
  std::string bias;
};

// An rms_norm: its weight ("" when the layer has none), eps, and Gemma's (1 + weight).
struct NormPlan {
  std::string weight;
  float eps = 0;
  bool unit_offset = false;
  bool present() const { return !weight.empty(); }
};

enum class Activation { kSilu, kGeluTanh };  // silu_mul (SwiGLU), gelu_tanh_mul (GeGLU)

struct LayerPlan {
  NormPlan input_norm;           // [H], before attention
  NormPlan post_attention_norm;  // [H], before the MLP (Gemma 3's pre_feedforward norm)
  // With qkv_fused (Phi-3) q holds the one [(NH + 2 KVH)·D, H] matrix and k, v are
  // empty; with gate_up_fused gate holds the [2I, H] matrix and up is empty. The slices
  // were checked to be q|k|v and gate|up in that order, the layout the kernels want.
  LinearWeights q, k, v, o, gate, up, down;
  bool qkv_fused = false, gate_up_fused = false;
  NormPlan q_norm, k_norm;  // per head [D] (Qwen3, Gemma 3), or absent
  // Applied to the block's output before the residual add (Gemma 3), or absent.
  NormPlan attention_output_norm, mlp_output_norm;
  int rope_table = 0;                            // index into DecoderPlan::rope_tables
  int64_t window = 0;                            // sliding-window attention (0: none)
  int k_cache_input = -1, v_cache_input = -1;    // engine input index
  int k_cache_output = -1, v_cache_output = -1;  // engine output index

  // The Llama/Qwen2 layer: the fused decode path runs it (norms folded into the GEMVs).
  bool plain() const {
    return !input_norm.unit_offset && !post_attention_norm.unit_offset && !q_norm.present() &&
           !k_norm.present() && !attention_output_norm.present() && !mlp_output_norm.present() &&
           window == 0;
  }
};

struct DecoderPlan {
  int64_t hidden = 0, q_heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int64_t vocab = 0, max_seq = 0;
  int64_t max_tokens = 0;  // bound of the tokens input's T
  float attention_scale = 0;
  int64_t rotary_dim = 0;  // rotated dims of a head (head_dim unless partial)
  // [rotary_dim / 2] each, as the CPU engine computes them; Gemma 3's local layers have
  // their own base, so a layer names its table.
  std::vector<std::vector<float>> rope_tables;
  Activation activation = Activation::kSilu;
  std::string embedding;      // [V, H]
  float embedding_scale = 0;  // Gemma's sqrt(H) normalizer (0: none)
  NormPlan final_norm;
  std::string lm_head;      // [V, H] (the embedding table when tied)
  float logit_softcap = 0;  // final_logit_softcapping (0: none)
  std::vector<LayerPlan> layers;
  int tokens_input = -1, position_input = -1;  // engine input index
  int logits_output = -1;                      // engine output index
  int next_token_output = -1;                  // engine output index; -1: no argmax
};

// Head dims the fast attention kernels (decode_attention, prefill_attention) are built
// for; other even head dims up to 256 run on generic_attention.
bool attention_head_dim_supported(int64_t head_dim);

// Matches `graph` (a validated partition subgraph). Engine inputs are graph.inputs in
// order; engine outputs graph.outputs, then every mutation's updated value not already
// among them (the CPU engine's order). Errors: NotSupported naming the node, value or
// attribute the CUDA engine cannot run; InvalidProgram for a malformed attribute.
Result<DecoderPlan> plan_decoder(const graph::Graph& graph);

}  // namespace kvrt::engine::cuda
