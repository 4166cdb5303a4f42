// Cuts one engine partition out of a method graph as a standalone subgraph: the
// engine payload. The subgraph's own I/O order is the engine's order (inputs by first
// use, outputs: user outputs, then other boundary values, then cache updates); the
// delegate call's argument order is chosen separately by the method builder and the
// blob bindings are matched to it by value identity (B2, B3).
#pragma once

#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/graph/graph.h"
#include "kvrt/partition/partitioner.h"

namespace kvrt::lowering {

// For every value of a method graph: the buffer whose storage it is (the buffer value
// itself, or the output of a kv_cache_write on it), or -1.
std::vector<graph::ValueId> buffer_roots(const graph::Graph& graph);

struct PartitionCut {
  graph::Graph subgraph;
  std::vector<graph::ValueId> from_sub;  // subgraph value id -> method graph value id
  std::vector<graph::ValueId> to_sub;    // method graph value id -> subgraph id, or -1
  // For each cache update output (subgraph id): the subgraph input it aliases.
  std::vector<graph::BufferMutation> aliases;
};

// The partition `index` of `plan`. Boundary inputs are the values its nodes read that
// it does not produce (parameters excepted: engines take weights by name); boundary
// outputs are the values it produces that a later node reads, that are user outputs,
// or that update a buffer. Buffer-backed inputs keep kind kBuffer.
Result<PartitionCut> cut_partition(const graph::Graph& graph, const partition::PartitionPlan& plan,
                                   size_t index, const std::vector<graph::ValueId>& roots);

}  // namespace kvrt::lowering
