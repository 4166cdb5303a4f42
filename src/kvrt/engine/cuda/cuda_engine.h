// The CUDA engine: runs a partition holding a whole Llama/Qwen2 decoder (token ids to
// logits, updating the KV cache in place) on one Hopper GPU with the kernel library.
// Built once per partition from its subgraph (decoder_plan.h); weights come from the
// program's shared device store (weight_store.h). docs/cuda-engine.md.
#pragma once

#include <memory>
#include <span>

#include "kvrt/engine/common/engine.h"
#include "kvrt/engine/common/engine_target.h"
#include "kvrt/graph/graph.h"

namespace kvrt::engine::cuda {

// Builds from a partition payload (graph JSON) for options.device (cuda:N).
Result<std::unique_ptr<Engine>> build_cuda_engine(std::span<const std::byte> payload,
                                                  const WeightProvider& weights,
                                                  const EngineOptions& options);
Result<std::unique_ptr<Engine>> build_cuda_engine(const graph::Graph& graph,
                                                  const WeightProvider& weights,
                                                  const EngineOptions& options);

// The target the engine delegate uses for Device::cuda(N).
EngineTarget cuda_engine_target();

}  // namespace kvrt::engine::cuda
