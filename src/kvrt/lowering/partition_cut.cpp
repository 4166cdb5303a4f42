#include "kvrt/lowering/partition_cut.h"

#include <algorithm>
#include <string>

namespace kvrt::lowering {
namespace {

using graph::ValueId;
using graph::ValueKind;

constexpr std::string_view kCacheWriteOp = "kv_cache_write";

}  // namespace

std::vector<ValueId> buffer_roots(const graph::Graph& graph) {
  std::vector<ValueId> roots(graph.values.size(), -1);
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (graph.values[v].kind == ValueKind::kBuffer) roots[v] = static_cast<ValueId>(v);
  }
  for (const graph::Node& node : graph.nodes) {
    if (node.op == kCacheWriteOp && !node.inputs.empty() && node.outputs.size() == 1) {
      roots[static_cast<size_t>(node.outputs[0])] = roots[static_cast<size_t>(node.inputs[0])];
    }
  }
  return roots;
}

Result<PartitionCut> cut_partition(const graph::Graph& graph, const partition::PartitionPlan& plan,
                                   size_t index, const std::vector<ValueId>& roots) {
  const partition::Partition& part = plan.partitions[index];
  const size_t begin = part.first, end = part.first + part.count;
  const size_t num_values = graph.values.size();
  std::vector<bool> produced(num_values, false), read_outside(num_values, false);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const bool inside = n >= begin && n < end;
    for (ValueId v : graph.nodes[n].inputs) {
      if (!inside) read_outside[static_cast<size_t>(v)] = true;
    }
    for (ValueId v : graph.nodes[n].outputs) {
      if (inside) produced[static_cast<size_t>(v)] = true;
    }
  }

  PartitionCut cut;
  cut.to_sub.assign(num_values, -1);
  graph::Graph& sub = cut.subgraph;
  auto add = [&](ValueId v, ValueKind kind) {
    graph::Value value = graph.values[static_cast<size_t>(v)];
    value.kind = kind;
    const ValueId id = sub.add_value(std::move(value));
    cut.to_sub[static_cast<size_t>(v)] = id;
    cut.from_sub.push_back(v);
    return id;
  };
  // Values in first-use order; boundary inputs become subgraph inputs as met.
  for (size_t n = begin; n < end; ++n) {
    graph::Node node = graph.nodes[n];
    for (ValueId& v : node.inputs) {
      const size_t i = static_cast<size_t>(v);
      if (cut.to_sub[i] < 0) {
        if (graph.values[i].kind == ValueKind::kParameter) {
          add(v, ValueKind::kParameter);
        } else {
          // Produced values are added by their producer, which comes first (validated).
          sub.inputs.push_back(add(v, roots[i] >= 0 ? ValueKind::kBuffer : ValueKind::kInput));
        }
      }
      v = cut.to_sub[i];
    }
    for (ValueId& v : node.outputs) v = add(v, ValueKind::kIntermediate);
    sub.nodes.push_back(std::move(node));
  }
  // Outputs in the engine's order: user outputs, other values read later, cache updates.
  for (ValueId v : graph.outputs) {
    if (produced[static_cast<size_t>(v)]) sub.outputs.push_back(cut.to_sub[static_cast<size_t>(v)]);
  }
  for (size_t n = begin; n < end; ++n) {
    for (ValueId v : graph.nodes[n].outputs) {
      const size_t i = static_cast<size_t>(v);
      const ValueId s = cut.to_sub[i];
      const bool listed = std::find(sub.outputs.begin(), sub.outputs.end(), s) != sub.outputs.end();
      if (read_outside[i] && roots[i] < 0 && !listed) sub.outputs.push_back(s);
    }
  }
  for (size_t n = begin; n < end; ++n) {
    const graph::Node& node = graph.nodes[n];
    if (node.op != kCacheWriteOp) continue;
    const graph::BufferMutation alias{cut.to_sub[static_cast<size_t>(node.inputs[0])],
                                      cut.to_sub[static_cast<size_t>(node.outputs[0])]};
    sub.outputs.push_back(alias.updated);
    sub.mutations.push_back(alias);
    cut.aliases.push_back(alias);
  }
  Status valid = sub.validate();
  if (!valid.ok()) {
    return internal_error("lowering: partition ", index, " (nodes ", begin, "..", end - 1,
                          ") cut into an invalid subgraph: ", valid.message());
  }
  return cut;
}

}  // namespace kvrt::lowering
