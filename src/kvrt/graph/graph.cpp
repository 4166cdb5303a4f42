// Graph construction helpers and the structural validator. Every consumer of a graph
// (partitioner, lowering, engines at init) calls validate() before trusting ids, so
// the checks here are what make a malformed payload an error instead of a crash.
#include "kvrt/graph/graph.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "kvrt/core/tensor.h"

namespace kvrt::graph {
namespace {

constexpr std::string_view kCacheWriteOp = "kv_cache_write";

std::string shape_string(const std::vector<Dim>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i].is_dynamic() ? shape[i].symbol : std::to_string(shape[i].size);
  }
  return out + "]";
}

Status check_values(const Graph& graph) {
  std::unordered_set<std::string_view> names;
  for (size_t id = 0; id < graph.values.size(); ++id) {
    const Value& value = graph.values[id];
    if (value.name.empty()) return invalid_program("value ", id, " has an empty name");
    if (!names.insert(value.name).second) {
      return invalid_program("value name '", value.name, "' is used twice");
    }
    if (dtype_size(value.dtype) == 0) {
      return invalid_program("value '", value.name, "' has an invalid dtype");
    }
    if (value.shape.size() > static_cast<size_t>(Shape::kMaxRank)) {
      return invalid_program("value '", value.name, "' has rank ", value.shape.size(),
                             ", above the maximum of ", Shape::kMaxRank);
    }
    for (const Dim& dim : value.shape) {
      const bool ok =
          dim.is_dynamic() ? dim.size == -1 && dim.min >= 0 && dim.min <= dim.max : dim.size >= 0;
      if (!ok) {
        return invalid_program("value '", value.name, "' has an invalid dim in shape ",
                               shape_string(value.shape), " (size ", dim.size, ", min ", dim.min,
                               ", max ", dim.max, ")");
      }
    }
  }
  return Status();
}

Status check_id(const Graph& graph, ValueId id, std::string_view where) {
  if (id < 0 || static_cast<size_t>(id) >= graph.values.size()) {
    return invalid_program(where, " refers to value id ", id, ", out of range (",
                           graph.values.size(), " values)");
  }
  return Status();
}

// Producer of each intermediate (node index); checks ids, uniqueness and kinds.
Result<std::vector<int>> find_producers(const Graph& graph) {
  std::vector<int> producer(graph.values.size(), -1);
  std::unordered_set<std::string_view> node_names;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.name.empty()) return invalid_program("node ", n, " has an empty name");
    if (!node_names.insert(node.name).second) {
      return invalid_program("node name '", node.name, "' is used twice");
    }
    if (node.op.empty()) return invalid_program("node '", node.name, "' has an empty op");
    if (!node.attributes.is_object()) {
      return invalid_program("node '", node.name, "' attributes must be an object");
    }
    if (node.outputs.empty()) return invalid_program("node '", node.name, "' has no outputs");
    for (ValueId id : node.inputs) {
      KVRT_RETURN_IF_ERROR(check_id(graph, id, "node '" + node.name + "' input"));
    }
    for (ValueId id : node.outputs) {
      KVRT_RETURN_IF_ERROR(check_id(graph, id, "node '" + node.name + "' output"));
      const Value& value = graph.values[static_cast<size_t>(id)];
      if (value.kind != ValueKind::kIntermediate) {
        return invalid_program("node '", node.name, "' outputs ", value_kind_name(value.kind),
                               " value '", value.name, "'; node outputs must be intermediates");
      }
      int& slot = producer[static_cast<size_t>(id)];
      if (slot >= 0) {
        return invalid_program("value '", value.name, "' is produced by both node '",
                               graph.nodes[static_cast<size_t>(slot)].name, "' and node '",
                               node.name, "'");
      }
      slot = static_cast<int>(n);
    }
  }
  for (size_t id = 0; id < graph.values.size(); ++id) {
    if (graph.values[id].kind == ValueKind::kIntermediate && producer[id] < 0) {
      return invalid_program("intermediate value '", graph.values[id].name, "' has no producer");
    }
  }
  return producer;
}

// Nodes read only values that exist by then; a buffer is read through its updated
// value once a kv_cache_write has written it.
Status check_order(const Graph& graph, const std::vector<int>& producer) {
  std::unordered_map<ValueId, size_t> writer_of_buffer;  // buffer -> kv_cache_write node
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    for (ValueId id : node.inputs) {
      const Value& value = graph.values[static_cast<size_t>(id)];
      const int made_by = producer[static_cast<size_t>(id)];
      if (made_by >= 0 && static_cast<size_t>(made_by) >= n) {
        return invalid_program("node '", node.name, "' reads '", value.name,
                               "' before its producer '",
                               graph.nodes[static_cast<size_t>(made_by)].name,
                               "' (nodes must be in topological order)");
      }
      auto written = writer_of_buffer.find(id);
      if (written != writer_of_buffer.end()) {
        return invalid_program("node '", node.name, "' reads buffer '", value.name,
                               "' after node '", graph.nodes[written->second].name,
                               "' wrote it; read that node's output instead");
      }
    }
    if (node.op != kCacheWriteOp) continue;
    if (node.inputs.empty() || node.outputs.size() != 1) {
      return invalid_program("kv_cache_write node '", node.name,
                             "' needs a cache input and exactly one output");
    }
    const ValueId cache = node.inputs[0];
    const Value& cache_value = graph.values[static_cast<size_t>(cache)];
    if (cache_value.kind != ValueKind::kBuffer) {
      return invalid_program("kv_cache_write node '", node.name, "' writes ",
                             value_kind_name(cache_value.kind), " value '", cache_value.name,
                             "'; input 0 must be a buffer");
    }
    // A second write to the same buffer reads it after the first and is refused above.
    writer_of_buffer.emplace(cache, n);
  }
  return Status();
}

Status check_io(const Graph& graph) {
  std::unordered_set<ValueId> seen;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const ValueId id = graph.inputs[i];
    KVRT_RETURN_IF_ERROR(check_id(graph, id, "graph input " + std::to_string(i)));
    const Value& value = graph.values[static_cast<size_t>(id)];
    if (value.kind != ValueKind::kInput && value.kind != ValueKind::kBuffer) {
      return invalid_program("graph input '", value.name, "' is a ", value_kind_name(value.kind),
                             " value; inputs must be input or buffer values");
    }
    if (!seen.insert(id).second) {
      return invalid_program("value '", value.name, "' is listed twice in graph inputs");
    }
  }
  for (size_t id = 0; id < graph.values.size(); ++id) {
    if (graph.values[id].kind == ValueKind::kInput && !seen.contains(static_cast<ValueId>(id))) {
      return invalid_program("input value '", graph.values[id].name,
                             "' is not listed in graph inputs");
    }
  }
  seen.clear();
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const ValueId id = graph.outputs[i];
    KVRT_RETURN_IF_ERROR(check_id(graph, id, "graph output " + std::to_string(i)));
    if (!seen.insert(id).second) {
      return invalid_program("value '", graph.values[static_cast<size_t>(id)].name,
                             "' is listed twice in graph outputs");
    }
  }
  return Status();
}

Status check_mutations(const Graph& graph, const std::vector<int>& producer) {
  std::unordered_set<ValueId> buffers;
  std::unordered_set<ValueId> updated;
  for (size_t i = 0; i < graph.mutations.size(); ++i) {
    const BufferMutation& mutation = graph.mutations[i];
    const std::string where = "mutation " + std::to_string(i);
    KVRT_RETURN_IF_ERROR(check_id(graph, mutation.buffer, where + " buffer"));
    KVRT_RETURN_IF_ERROR(check_id(graph, mutation.updated, where + " updated"));
    const Value& buffer = graph.values[static_cast<size_t>(mutation.buffer)];
    const Value& result = graph.values[static_cast<size_t>(mutation.updated)];
    if (buffer.kind != ValueKind::kBuffer) {
      return invalid_program(where, ": '", buffer.name, "' is a ", value_kind_name(buffer.kind),
                             " value, not a buffer");
    }
    const int made_by = producer[static_cast<size_t>(mutation.updated)];
    if (made_by < 0 || graph.nodes[static_cast<size_t>(made_by)].op != kCacheWriteOp) {
      return invalid_program(where, ": updated value '", result.name,
                             "' is not produced by a kv_cache_write node");
    }
    const Node& writer = graph.nodes[static_cast<size_t>(made_by)];
    if (writer.inputs[0] != mutation.buffer) {
      return invalid_program(where, ": node '", writer.name, "' writes '",
                             graph.values[static_cast<size_t>(writer.inputs[0])].name,
                             "', not buffer '", buffer.name, "'");
    }
    if (!buffers.insert(mutation.buffer).second) {
      return invalid_program("buffer '", buffer.name, "' has more than one mutation");
    }
    updated.insert(mutation.updated);
  }
  for (const Node& node : graph.nodes) {
    if (node.op == kCacheWriteOp && !updated.contains(node.outputs[0])) {
      return invalid_program("kv_cache_write node '", node.name, "' output '",
                             graph.values[static_cast<size_t>(node.outputs[0])].name,
                             "' is not declared as a buffer mutation");
    }
  }
  return Status();
}

}  // namespace

std::string_view value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInput:
      return "input";
    case ValueKind::kParameter:
      return "parameter";
    case ValueKind::kBuffer:
      return "buffer";
    case ValueKind::kIntermediate:
      return "intermediate";
  }
  return "invalid";
}

Result<ValueKind> parse_value_kind(std::string_view name) {
  for (ValueKind kind :
       {ValueKind::kInput, ValueKind::kParameter, ValueKind::kBuffer, ValueKind::kIntermediate}) {
    if (value_kind_name(kind) == name) return kind;
  }
  return invalid_argument("unknown value kind '", name,
                          "' (expected input, parameter, buffer or intermediate)");
}

ValueId Graph::add_value(Value value) {
  values.push_back(std::move(value));
  return static_cast<ValueId>(values.size() - 1);
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  for (size_t id = 0; id < values.size(); ++id) {
    if (values[id].name == name) return static_cast<ValueId>(id);
  }
  return std::nullopt;
}

Status Graph::validate() const {
  KVRT_RETURN_IF_ERROR(check_values(*this));
  KVRT_ASSIGN_OR_RETURN(std::vector<int> producer, find_producers(*this));
  KVRT_RETURN_IF_ERROR(check_order(*this, producer));
  KVRT_RETURN_IF_ERROR(check_io(*this));
  return check_mutations(*this, producer);
}

}  // namespace kvrt::graph
