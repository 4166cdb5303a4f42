// The graph's JSON form. Engines parse it at init from a delegate blob, so the reader
// is strict: every field is type- and range-checked, unknown fields are refused (a
// newer writer fails closed on an older reader), and the result is validated.
#include <limits>
#include <string>

#include "kvrt/graph/graph.h"

namespace kvrt::graph {
namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "kvrt.graph";
constexpr int64_t kVersion = 1;

json dim_to_json(const Dim& dim) {
  if (!dim.is_dynamic()) return dim.size;
  return {{"symbol", dim.symbol}, {"min", dim.min}, {"max", dim.max}};
}

// Field readers: `path` is the field's location, used verbatim in error messages.
Status field_error(const std::string& path, std::string_view what) {
  return invalid_program("graph JSON: ", path, ": ", what);
}

Status check_keys(const json& object, const std::string& path,
                  std::initializer_list<std::string_view> allowed) {
  if (!object.is_object()) return field_error(path, "expected an object");
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view name : allowed) known = known || key == name;
    if (!known) return field_error(path.empty() ? key : path + "." + key, "unknown field");
  }
  for (std::string_view name : allowed) {
    if (!object.contains(name)) {
      return field_error(path.empty() ? std::string(name) : path + "." + std::string(name),
                         "missing");
    }
  }
  return Status();
}

Result<int64_t> read_int(const json& value, const std::string& path, int64_t min, int64_t max) {
  if (!value.is_number_integer()) return field_error(path, "expected an integer");
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return field_error(path, "integer out of range");
  }
  const int64_t number = value.get<int64_t>();
  if (number < min || number > max) {
    return field_error(path, "value " + std::to_string(number) + " is outside " +
                                 std::to_string(min) + ".." + std::to_string(max));
  }
  return number;
}

Result<std::string> read_string(const json& value, const std::string& path) {
  if (!value.is_string()) return field_error(path, "expected a string");
  return value.get<std::string>();
}

Result<std::vector<ValueId>> read_ids(const json& value, const std::string& path) {
  if (!value.is_array()) return field_error(path, "expected an array of value ids");
  std::vector<ValueId> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(int64_t id, read_int(value[i], path + "[" + std::to_string(i) + "]", 0,
                                               std::numeric_limits<ValueId>::max()));
    ids.push_back(static_cast<ValueId>(id));
  }
  return ids;
}

Result<Dim> read_dim(const json& value, const std::string& path) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (value.is_number()) {
    KVRT_ASSIGN_OR_RETURN(int64_t size, read_int(value, path, 0, kMax));
    return Dim::fixed(size);
  }
  KVRT_RETURN_IF_ERROR(check_keys(value, path, {"symbol", "min", "max"}));
  KVRT_ASSIGN_OR_RETURN(std::string symbol, read_string(value["symbol"], path + ".symbol"));
  if (symbol.empty()) return field_error(path + ".symbol", "must not be empty");
  KVRT_ASSIGN_OR_RETURN(int64_t min, read_int(value["min"], path + ".min", 0, kMax));
  KVRT_ASSIGN_OR_RETURN(int64_t max, read_int(value["max"], path + ".max", min, kMax));
  return Dim::dynamic(std::move(symbol), min, max);
}

Result<Value> read_value(const json& object, const std::string& path) {
  KVRT_RETURN_IF_ERROR(check_keys(object, path, {"name", "dtype", "kind", "shape"}));
  Value value;
  KVRT_ASSIGN_OR_RETURN(value.name, read_string(object["name"], path + ".name"));
  KVRT_ASSIGN_OR_RETURN(std::string dtype, read_string(object["dtype"], path + ".dtype"));
  auto parsed_dtype = parse_dtype(dtype);
  if (!parsed_dtype.ok()) return field_error(path + ".dtype", parsed_dtype.status().message());
  value.dtype = *parsed_dtype;
  KVRT_ASSIGN_OR_RETURN(std::string kind, read_string(object["kind"], path + ".kind"));
  auto parsed_kind = parse_value_kind(kind);
  if (!parsed_kind.ok()) return field_error(path + ".kind", parsed_kind.status().message());
  value.kind = *parsed_kind;
  const json& shape = object["shape"];
  if (!shape.is_array()) return field_error(path + ".shape", "expected an array");
  for (size_t i = 0; i < shape.size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(Dim dim, read_dim(shape[i], path + ".shape[" + std::to_string(i) + "]"));
    value.shape.push_back(std::move(dim));
  }
  return value;
}

Result<Node> read_node(const json& object, const std::string& path) {
  KVRT_RETURN_IF_ERROR(check_keys(object, path, {"name", "op", "inputs", "outputs", "attributes"}));
  Node node;
  KVRT_ASSIGN_OR_RETURN(node.name, read_string(object["name"], path + ".name"));
  KVRT_ASSIGN_OR_RETURN(node.op, read_string(object["op"], path + ".op"));
  KVRT_ASSIGN_OR_RETURN(node.inputs, read_ids(object["inputs"], path + ".inputs"));
  KVRT_ASSIGN_OR_RETURN(node.outputs, read_ids(object["outputs"], path + ".outputs"));
  if (!object["attributes"].is_object()) {
    return field_error(path + ".attributes", "expected an object");
  }
  node.attributes = object["attributes"];
  return node;
}

Result<Graph> read_graph(const json& root) {
  KVRT_RETURN_IF_ERROR(check_keys(
      root, "", {"format", "version", "values", "nodes", "inputs", "outputs", "mutations"}));
  KVRT_ASSIGN_OR_RETURN(std::string format, read_string(root["format"], "format"));
  if (format != kFormat) return field_error("format", "expected \"kvrt.graph\"");
  KVRT_ASSIGN_OR_RETURN(int64_t version, read_int(root["version"], "version", 0, 1 << 30));
  if (version != kVersion) {
    return field_error("version",
                       "unsupported version " + std::to_string(version) + " (this reader knows 1)");
  }
  for (const char* list : {"values", "nodes", "mutations"}) {
    if (!root[list].is_array()) return field_error(list, "expected an array");
  }
  Graph graph;
  const json& values = root["values"];
  for (size_t i = 0; i < values.size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(Value value, read_value(values[i], "values[" + std::to_string(i) + "]"));
    graph.values.push_back(std::move(value));
  }
  const json& nodes = root["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(Node node, read_node(nodes[i], "nodes[" + std::to_string(i) + "]"));
    graph.nodes.push_back(std::move(node));
  }
  KVRT_ASSIGN_OR_RETURN(graph.inputs, read_ids(root["inputs"], "inputs"));
  KVRT_ASSIGN_OR_RETURN(graph.outputs, read_ids(root["outputs"], "outputs"));
  const json& mutations = root["mutations"];
  for (size_t i = 0; i < mutations.size(); ++i) {
    const std::string path = "mutations[" + std::to_string(i) + "]";
    KVRT_RETURN_IF_ERROR(check_keys(mutations[i], path, {"buffer", "updated"}));
    constexpr int64_t kMaxId = std::numeric_limits<ValueId>::max();
    KVRT_ASSIGN_OR_RETURN(int64_t buffer,
                          read_int(mutations[i]["buffer"], path + ".buffer", 0, kMaxId));
    KVRT_ASSIGN_OR_RETURN(int64_t updated,
                          read_int(mutations[i]["updated"], path + ".updated", 0, kMaxId));
    graph.mutations.push_back({static_cast<ValueId>(buffer), static_cast<ValueId>(updated)});
  }
  Status valid = graph.validate();
  if (!valid.ok()) return valid.with_context("graph JSON");
  return graph;
}

}  // namespace

json to_json(const Graph& graph) {
  json values = json::array();
  for (const Value& value : graph.values) {
    json shape = json::array();
    for (const Dim& dim : value.shape) shape.push_back(dim_to_json(dim));
    values.push_back({{"name", value.name},
                      {"dtype", dtype_name(value.dtype)},
                      {"kind", value_kind_name(value.kind)},
                      {"shape", std::move(shape)}});
  }
  json nodes = json::array();
  for (const Node& node : graph.nodes) {
    nodes.push_back({{"name", node.name},
                     {"op", node.op},
                     {"inputs", node.inputs},
                     {"outputs", node.outputs},
                     {"attributes", node.attributes}});
  }
  json mutations = json::array();
  for (const BufferMutation& mutation : graph.mutations) {
    mutations.push_back({{"buffer", mutation.buffer}, {"updated", mutation.updated}});
  }
  return {{"format", kFormat},
          {"version", kVersion},
          {"values", std::move(values)},
          {"nodes", std::move(nodes)},
          {"inputs", graph.inputs},
          {"outputs", graph.outputs},
          {"mutations", std::move(mutations)}};
}

Result<Graph> graph_from_json(const json& json_graph) {
  try {
    return read_graph(json_graph);
  } catch (const json::exception& error) {  // defensive: the readers check types first
    return invalid_program("graph JSON: ", error.what());
  }
}

Result<Graph> graph_from_json_text(std::string_view text, std::string_view source) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return invalid_program(source, ": graph JSON is not valid JSON");
  auto graph = graph_from_json(parsed);
  if (!graph.ok()) return graph.status().with_context(source);
  return graph;
}

}  // namespace kvrt::graph
