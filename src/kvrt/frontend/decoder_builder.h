// The graph writer and the decoder builder behind build_llama_graph, shared by
// llama_graph.cpp (the model, Llama-shaped layers), decoder_attention.cpp (the attention
// block of every family) and gemma_graph.cpp (Gemma and Gemma 3 layers). Internal to
// the frontend.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "kvrt/frontend/llama_graph.h"

namespace kvrt::frontend::detail {

// Appends values and nodes; parameters come from the weight index (stored dtype and
// shape), added once each however often they are used.
class GraphWriter {
 public:
  explicit GraphWriter(const WeightIndex& weights) : weights_(weights) {}

  graph::ValueId input(std::string name, DType dtype, std::vector<graph::Dim> shape);
  graph::ValueId buffer(std::string name, DType dtype, std::vector<graph::Dim> shape);
  graph::ValueId param(const std::string& name);
  // One node with one new f32 (or `dtype`) output value named `value_name`.
  graph::ValueId node(const std::string& name, const char* op, std::vector<graph::ValueId> inputs,
                      std::vector<graph::Dim> shape,
                      nlohmann::json attributes = nlohmann::json::object(),
                      const std::string& value_name = "", DType dtype = DType::kF32);
  graph::Graph& graph() { return graph_; }

 private:
  const WeightIndex& weights_;
  graph::Graph graph_;
  std::unordered_map<std::string, graph::ValueId> params_;
};

struct Dims {
  graph::Dim t;  // tokens in this call
  graph::Dim h, q_width, kv_width, mlp;
  int64_t max_seq = 0;
};

class DecoderBuilder {
 public:
  DecoderBuilder(const ModelConfig& config, const WeightIndex& weights, const BuildOptions& options,
                 Dims dims)
      : c_(config), options_(options), d_(std::move(dims)), w_(weights) {}

  graph::Graph build();

 private:
  using ValueId = graph::ValueId;

  // x · weightᵀ (+ bias when asked): [T, K] -> [T, N].
  ValueId linear(const std::string& node, ValueId x, const std::string& weight, bool bias,
                 graph::Dim n);
  // rms_norm of x [T, width] with `weight` (a tensor name); per head when head_dim > 0.
  // Gemma's norms scale by (1 + weight).
  ValueId norm(const std::string& node, ValueId x, const std::string& weight, graph::Dim width,
               int64_t head_dim = 0);
  // Columns begin..begin+size-1 of x [T, N] (Phi-3's fused projections).
  ValueId slice(const std::string& node, ValueId x, int64_t begin, int64_t size);
  // Writes `rows` [T, KVH·D] into cache buffer `name` at the position input; returns the
  // updated cache value and records the mutation.
  ValueId cache_write(const std::string& node, const std::string& name, ValueId rows);
  nlohmann::json rope_attributes(int64_t layer, int64_t heads) const;
  nlohmann::json attention_attributes(int64_t layer) const;

  // normed [T, H] -> o_proj output [T, H]: q, k, v (or Phi-3's fused qkv), Qwen3/Gemma 3
  // q/k norms, rope, cache writes, attention, o.
  ValueId attention_block(int64_t layer, ValueId normed);
  ValueId llama_layer(int64_t layer, ValueId x);
  ValueId gemma_layer(int64_t layer, ValueId x);

  const ModelConfig& c_;
  const BuildOptions& options_;
  Dims d_;
  GraphWriter w_;
  ValueId position_ = -1;
};

}  // namespace kvrt::frontend::detail
