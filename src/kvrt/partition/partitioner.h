// The partitioner: tags each node of a method graph `engine` or `host` and groups
// contiguous engine nodes into partitions. It only tags; lowering (lowering/) cuts the
// partitions into delegate blobs. Mutable buffers are values, never nodes, so they are
// in no partition: they stay owned by the program and reach a partition as inputs (B1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/graph/graph.h"

namespace kvrt::partition {

enum class Placement : uint8_t { kEngine, kHost };
// "engine" / "host".
std::string_view placement_name(Placement placement);

// Every op of docs/graph.md: engines implement all of them, and so does the host
// kernel library, so an op outside this list cannot run anywhere.
bool is_known_op(std::string_view op);
// Whether the engine delegate takes this op (today: every known op).
bool engine_supports(std::string_view op);

struct PartitionOptions {
  // Node names ("layers.0.attn.attention") or op names ("rope") kept on the host, so
  // tests and debugging can build multi-partition programs.
  std::set<std::string, std::less<>> force_host;
};

// A run of consecutive engine nodes: graph.nodes[first, first + count).
struct Partition {
  size_t first = 0;
  size_t count = 0;
};

struct PartitionPlan {
  std::vector<Placement> placement;   // per node
  std::vector<int> partition_of;      // per node: index into partitions, -1 on the host
  std::vector<Partition> partitions;  // in node order
  // force_host entries that matched no node name and no op of this graph.
  std::vector<std::string> unmatched_force_host;
};

// Tags the nodes of a validated graph. Errors: NotSupported naming the node for an op
// outside the vocabulary; InvalidProgram if the graph does not validate.
Result<PartitionPlan> partition_graph(const graph::Graph& graph, const PartitionOptions& options);

}  // namespace kvrt::partition
