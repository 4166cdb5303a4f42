// Placement is a per-node decision (supported by the engine and not forced to the
// host); partitions are the maximal runs of engine nodes in topological order, so a
// host node between two engine nodes splits them and the program's instruction order
// is the graph's node order.
#include "kvrt/partition/partitioner.h"

#include <algorithm>

namespace kvrt::partition {
namespace {

constexpr std::string_view kKnownOps[] = {"embedding",      "rms_norm",  "linear",   "rope",
                                          "kv_cache_write", "attention", "silu_mul", "add",
                                          "take_last",      "argmax"};
// Ops only some model families use (Gemma, Gemma 3, Phi-3).
constexpr std::string_view kFamilyOps[] = {"scale", "gelu_tanh_mul", "softcap", "slice"};

}  // namespace

std::string_view placement_name(Placement placement) {
  return placement == Placement::kEngine ? "engine" : "host";
}

bool is_known_op(std::string_view op) {
  return std::find(std::begin(kKnownOps), std::end(kKnownOps), op) != std::end(kKnownOps) ||
         std::find(std::begin(kFamilyOps), std::end(kFamilyOps), op) != std::end(kFamilyOps);
}

bool engine_supports(std::string_view op) {
  return is_known_op(op);
}

Result<PartitionPlan> partition_graph(const graph::Graph& graph, const PartitionOptions& options) {
  KVRT_RETURN_IF_ERROR(graph.validate());
  PartitionPlan plan;
  plan.placement.resize(graph.nodes.size(), Placement::kHost);
  plan.partition_of.resize(graph.nodes.size(), -1);
  std::set<std::string, std::less<>> matched;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const graph::Node& node = graph.nodes[n];
    if (!is_known_op(node.op)) {
      return not_supported("node '", node.name, "': op '", node.op,
                           "' is not in the op vocabulary (docs/graph.md)");
    }
    const bool by_name = options.force_host.contains(node.name);
    const bool by_op = options.force_host.contains(node.op);
    if (by_name) matched.insert(node.name);
    if (by_op) matched.insert(node.op);
    if (by_name || by_op || !engine_supports(node.op)) continue;
    plan.placement[n] = Placement::kEngine;
    if (n == 0 || plan.placement[n - 1] != Placement::kEngine) {
      plan.partitions.push_back({n, 0});
    }
    ++plan.partitions.back().count;
    plan.partition_of[n] = static_cast<int>(plan.partitions.size() - 1);
  }
  for (const std::string& name : options.force_host) {
    if (!matched.contains(name)) plan.unmatched_force_host.push_back(name);
  }
  return plan;
}

}  // namespace kvrt::partition
