// A Hugging Face checkpoint directory opened for export: config.json, the optional
// generation_config.json, and the weights (model.safetensors, or shards listed by
// model.safetensors.index.json), memory-mapped.
//
//   KVRT_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
//   KVRT_ASSIGN_OR_RETURN(graph::Graph prefill, ckpt.build_graph({MethodKind::kPrefill}));
//   for (const WeightEntry& entry : ckpt.weights().entries()) { ckpt.weights().bytes(entry) }
#pragma once

#include <string>

#include "kvrt/core/result.h"
#include "kvrt/frontend/generation_config.h"
#include "kvrt/frontend/llama_graph.h"
#include "kvrt/frontend/model_config.h"
#include "kvrt/frontend/weight_index.h"

namespace kvrt::frontend {

class Checkpoint {
 public:
  // Parses the configs and maps the weights; does not check the weights against the
  // config (build_graph does). Errors name the file and field or tensor. When
  // generation_config.json is absent, its token ids come from config.json.
  static Result<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const GenerationConfig& generation() const { return generation_; }
  const WeightIndex& weights() const { return weights_; }

  // build_llama_graph(config(), weights(), options).
  Result<graph::Graph> build_graph(const BuildOptions& options) const;

 private:
  std::string dir_;
  ModelConfig config_;
  GenerationConfig generation_;
  WeightIndex weights_;
};

}  // namespace kvrt::frontend
