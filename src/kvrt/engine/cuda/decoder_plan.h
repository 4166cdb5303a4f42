// The CUDA engine's launch plan, compiled once from a partition subgraph: the graph's
// nodes matched, by dataflow, to the Llama/Qwen2 decoder pattern the kernel library
// runs as fused launches (docs/cuda-engine.md). Plain C++ (no CUDA), so the matcher and
// its refusals are tested on machines without a GPU.
//
//   embedding ─► per layer: rms_norm ─► q,k,v linear (+bias) ─► rope q,k ─►
//   kv_cache_write k,v ─► attention ─► o linear ─► add ─► rms_norm ─► gate,up linear ─►
//   silu_mul ─► down linear ─► add  ─►  rms_norm ─► take_last ─► lm_head linear
//   (─► argmax: the greedy next token, optional)
//
// Anything else (another op, a node outside the pattern, a dtype or shape the kernels
// do not run) is NotSupported naming the node or value, never run wrong. That includes
// every model-family op and attribute beyond Llama/Qwen2 (docs/graph.md: scale,
// gelu_tanh_mul, softcap, slice; (1 + w) and per-head rms_norm, partial rotary,
// attention windows), so Qwen3, Phi-3, Gemma, Gemma 3 and windowed Mistral graphs are
// refused by node name; a Mistral graph whose window is not shorter than the cache is a
// Llama graph and runs.
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

struct LayerPlan {
  std::string input_norm, post_attention_norm;  // rms_norm weights [H]
  float input_norm_eps = 0, post_attention_norm_eps = 0;
  LinearWeights q, k, v, o, gate, up, down;
  int k_cache_input = -1, v_cache_input = -1;    // engine input index
  int k_cache_output = -1, v_cache_output = -1;  // engine output index
};

struct DecoderPlan {
  int64_t hidden = 0, q_heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int64_t vocab = 0, max_seq = 0;
  int64_t max_tokens = 0;  // bound of the tokens input's T
  float attention_scale = 0;
  std::vector<float> rope_inv_freq;  // [head_dim / 2], as the CPU engine computes it
  std::string embedding;             // [V, H]
  std::string final_norm;
  float final_norm_eps = 0;
  std::string lm_head;  // [V, H] (the embedding table when tied)
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
