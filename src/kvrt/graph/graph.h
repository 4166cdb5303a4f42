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

// "input", "parameter", "buffer", "intermediate": the spelling in the JSON form.
std::string_view value_kind_name(ValueKind kind);
Result<ValueKind> parse_value_kind(std::string_view name);

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

// A method graph, or a partition's subgraph. Rules that validate() enforces:
// - value names and node names are non-empty and unique; shapes have rank <= 6; a
//   static dim has size >= 0, a dynamic one size -1 and 0 <= min <= max;
// - every kIntermediate value has exactly one producer, which comes before every
//   node that reads it; node outputs are kIntermediate values;
// - `inputs` lists every kInput value once, and may also list kBuffer values (a
//   partition subgraph receives the caches it updates as inputs); never a parameter;
// - every `kv_cache_write` writes a kBuffer value (its input 0), at most one write per
//   buffer, and its output is declared by exactly one mutation {buffer, updated};
//   conversely every mutation names such a pair. After the write, nodes read the
//   updated value, never the stale buffer value.
struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;  // topological order
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;  // user outputs (logits)
  std::vector<BufferMutation> mutations;

  // Appends a value and returns its id. Does not check the name (validate() does).
  ValueId add_value(Value value);
  std::optional<ValueId> find_value(std::string_view name) const;
  // Structural checks listed above. Errors (InvalidProgram) name the node or value.
  Status validate() const;
};

// The JSON form (the engine payload inside a delegate blob):
//   {"format": "kvrt.graph", "version": 1,
//    "values": [{"name", "dtype": "f32", "kind": "input",
//                "shape": [4, {"symbol": "T", "min": 1, "max": 128}]}, ...],
//    "nodes": [{"name", "op", "inputs": [value ids], "outputs": [ids],
//               "attributes": {...}}, ...],
//    "inputs": [ids], "outputs": [ids], "mutations": [{"buffer": id, "updated": id}]}
// Static dims are integers, dynamic dims objects. Value ids index "values".
nlohmann::json to_json(const Graph& graph);
// Parses and validates (validate()). Unknown or missing fields, wrong types and
// out-of-range numbers are InvalidProgram errors naming the field ("nodes[3].inputs[1]").
// Never throws.
Result<Graph> graph_from_json(const nlohmann::json& json);
// Same, from text (bad JSON is an error naming `source`, e.g. the blob).
Result<Graph> graph_from_json_text(std::string_view text, std::string_view source = "graph");

}  // namespace kvrt::graph
