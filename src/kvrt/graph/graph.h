// The graph IR: what the frontend builds, the partitioner tags, lowering cuts into
// delegate subgraphs, and engines execute (a partition's subgraph is the engine
// payload). Ops are Llama-level and documented with shapes in docs/graph.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"

namespace kvrt::graph {

using ValueId = int32_t;

// A dimension is static (symbol empty, size >= 0) or dynamic (symbol set, e.g. "T",
// size -1, with inclusive bounds min..max).
struct Dim {
  int64_t size = 0;
  std::string symbol;
  int64_t min = 0;
  int64_t max = 0;

  static Dim fixed(int64_t size) { return {size, "", size, size}; }
  static Dim dynamic(std::string symbol, int64_t min, int64_t max) {
    return {-1, std::move(symbol), min, max};
  }
  bool is_dynamic() const { return !symbol.empty(); }
  bool operator==(const Dim&) const = default;
};

enum class ValueKind : uint8_t {
  kInput,         // method input (tokens, position)
  kParameter,     // weight, referenced by name in the program's weight segment
  kBuffer,        // mutable buffer (KV cache): owned by the program, shared across methods
  kIntermediate,  // produced by a node
};

struct Value {
  std::string name;  // unique in the graph; parameters use the checkpoint tensor name
  DType dtype = DType::kF32;
  std::vector<Dim> shape;
  ValueKind kind = ValueKind::kIntermediate;
};

// Op names are strings in files ("linear", "kv_cache_write", ...); see docs/graph.md.
struct Node {
  std::string name;  // unique, e.g. "layers.0.attn.q_proj"
  std::string op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  nlohmann::json attributes = nlohmann::json::object();
};

// An in-place update of a mutable buffer: `updated` is produced by an op that writes
// `buffer`'s storage (kv_cache_write), so after the method runs, buffer == updated.
struct BufferMutation {
  ValueId buffer = -1;
  ValueId updated = -1;
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;  // topological order
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;  // user outputs (logits)
  std::vector<BufferMutation> mutations;

  ValueId add_value(Value value);
  std::optional<ValueId> find_value(std::string_view name) const;
  // Structural checks: ids in range, single producer, topological order, mutation
  // pairs consistent. Errors name the node or value.
  Status validate() const;
};

nlohmann::json to_json(const Graph& graph);
Result<Graph> graph_from_json(const nlohmann::json& json);

}  // namespace kvrt::graph
