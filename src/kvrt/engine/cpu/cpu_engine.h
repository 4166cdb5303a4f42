// The CPU engine: the reference implementation of every op of docs/graph.md in f32.
// It runs a partition subgraph node by node through ops.h. Weights are read in place
// from the WeightProvider's views (never copied); intermediates live in one scratch
// arena planned by lifetime at build; in-place cache updates write only the new rows
// into the caller's cache storage.
#pragma once

#include <memory>
#include <span>

#include "kvrt/engine/common/engine.h"
#include "kvrt/engine/common/engine_target.h"
#include "kvrt/graph/graph.h"

namespace kvrt::engine::cpu {

// Builds from a partition payload: the subgraph as graph JSON (docs/graph.md).
Result<std::unique_ptr<Engine>> build_cpu_engine(std::span<const std::byte> payload,
                                                 const WeightProvider& weights,
                                                 const EngineOptions& options);

// Builds from an in-memory subgraph (tests, tools). Engine inputs are graph.inputs in
// order; engine outputs are graph.outputs followed by every mutation's `updated`
// value not already among them. Each kv_cache_write output that is an engine output
// aliases the engine input it writes (aliased_input); a kv_cache_write whose result
// is not an engine output is refused, so no in-place write goes undeclared.
// Errors: InvalidProgram naming the node or value; NotFound/InvalidProgram for a
// weight that is missing or has the wrong dtype or shape.
Result<std::unique_ptr<Engine>> build_cpu_engine(const graph::Graph& graph,
                                                 const WeightProvider& weights,
                                                 const EngineOptions& options);

// The target the engine delegate uses for Device::cpu().
EngineTarget cpu_engine_target();

}  // namespace kvrt::engine::cpu
