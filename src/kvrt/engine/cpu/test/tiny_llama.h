// A tiny random Llama for the tests of the CPU engine, the engine delegate and the
// runtime: weights held in memory behind a WeightProvider, the method graph built the
// way docs/graph.md describes a decoder, and an independent reference forward pass
// (double precision, whole sequence, no cache) to compare logits against.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kvrt/engine/common/engine.h"
#include "kvrt/graph/graph.h"

namespace kvrt::testing {

struct TinyConfig {
  int64_t vocab = 32;
  int64_t hidden = 16;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 4;
  int64_t intermediate = 24;
  int64_t max_seq = 16;
  int64_t max_tokens = 8;  // the T bound of the method graph
  bool bias = false;       // q/k/v biases (Qwen2)
  bool tied = true;        // lm_head is the embedding table
  bool llama3_rope = false;
  bool next_token = false;  // also output argmax(logits) as next_token i32 [1, 1]
  DType weight_dtype = DType::kF32;
  DType cache_dtype = DType::kF32;
  double theta = 10000.0;
  double eps = 1e-5;
  uint32_t seed = 1;
};

// Weights by name, stored in their dtype; views point into this object.
class TinyWeights final : public engine::WeightProvider {
 public:
  struct Tensor {
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  Result<TensorView> weight(std::string_view name) const override;
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape,
           const std::vector<float>& values);
  // The stored value, widened to f32 (what engines compute with).
  std::vector<float> values(const std::string& name) const;
  const std::map<std::string, Tensor, std::less<>>& tensors() const { return tensors_; }

 private:
  std::map<std::string, Tensor, std::less<>> tensors_;
};

struct TinyModel {
  TinyConfig config;
  TinyWeights weights;

  // The method graph: inputs tokens i32 [1,T] (T in t_min..t_max), position i32 [1],
  // then (when `buffers_as_inputs`, as an engine partition takes them) k_cache.l and
  // v_cache.l for every layer (kBuffer values); output logits f32 [1, vocab]; one
  // mutation per cache. Without `buffers_as_inputs` it is a method graph as the
  // frontend builds it, ready for lowering.
  graph::Graph method_graph(int64_t t_min, int64_t t_max, bool buffers_as_inputs = true) const;
  // Logits of the last position after running `tokens` from position 0, computed
  // independently in double precision without a cache.
  std::vector<float> reference_logits(const std::vector<int32_t>& tokens) const;
  std::vector<std::string> buffer_names() const;
  std::vector<int64_t> cache_shape() const {
    return {config.kv_heads, config.max_seq, config.head_dim};
  }
};

TinyModel make_tiny_model(const TinyConfig& config);

// Rounds through `dtype` (identity for f32).
float round_to(DType dtype, float value);

}  // namespace kvrt::testing
