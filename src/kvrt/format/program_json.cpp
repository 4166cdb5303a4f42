// The program metadata JSON (schema in docs/program-format.md). The reader checks the
// type and range of every field and names the field in each error. An unknown key is
// refused in a file of this reader's minor version or older (it would be a field this
// reader silently does not honour) and ignored in a newer minor version, whose optional
// fields it may skip; missing required fields are errors.
#include "kvrt/format/program_json.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string>

namespace kvrt::format {
namespace {

using nlohmann::json;

Status field_error(const std::string& path, std::string_view what) {
  return invalid_program("program metadata: ", path, ": ", what);
}

std::string at(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
std::string at(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

Result<const json*> member(const json& object, const std::string& path, std::string_view key) {
  if (!object.is_object()) return field_error(path.empty() ? "(root)" : path, "expected object");
  auto it = object.find(key);
  if (it == object.end()) return field_error(at(path, key), "missing");
  return &*it;
}

// The largest dim (static, or a dynamic dim's bound) the reader accepts: beyond it a
// size is implausible, and products like (max + 1) * sizeof(int32) could wrap.
constexpr int64_t kMaxDim = int64_t{1} << 48;

// Refuses keys outside `known` when the reader is strict (see the file comment).
Status known_keys(const json& object, const std::string& path, bool strict,
                  std::initializer_list<std::string_view> known) {
  if (!strict || !object.is_object()) return Status();
  for (const auto& [key, unused] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return field_error(at(path, key), "unknown key (this reader would not honour it)");
    }
  }
  return Status();
}

Result<uint64_t> read_u64(const json& value, const std::string& path) {
  if (!value.is_number_unsigned()) return field_error(path, "expected a non-negative integer");
  return value.get<uint64_t>();
}

Result<int64_t> read_i64(const json& value, const std::string& path, int64_t min, int64_t max) {
  if (!value.is_number_integer()) return field_error(path, "expected an integer");
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return field_error(path, "integer out of range");
  }
  const int64_t number = value.get<int64_t>();
  if (number < min || number > max) {
    return field_error(path, "value " + std::to_string(number) + " out of range");
  }
  return number;
}

Result<std::string> read_string(const json& value, const std::string& path) {
  if (!value.is_string()) return field_error(path, "expected a string");
  return value.get<std::string>();
}

Result<std::string> string_field(const json& object, const std::string& path,
                                 std::string_view key) {
  KVRT_ASSIGN_OR_RETURN(const json* value, member(object, path, key));
  return read_string(*value, at(path, key));
}
Result<uint64_t> u64_field(const json& object, const std::string& path, std::string_view key) {
  KVRT_ASSIGN_OR_RETURN(const json* value, member(object, path, key));
  return read_u64(*value, at(path, key));
}
Result<const json*> array_field(const json& object, const std::string& path, std::string_view key) {
  KVRT_ASSIGN_OR_RETURN(const json* value, member(object, path, key));
  if (!value->is_array()) return field_error(at(path, key), "expected an array");
  return value;
}

Result<DType> dtype_field(const json& object, const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(std::string name, string_field(object, path, "dtype"));
  auto dtype = parse_dtype(name);
  if (!dtype.ok()) return field_error(at(path, "dtype"), "unknown dtype '" + name + "'");
  return *dtype;
}

Result<std::vector<int64_t>> static_shape_field(const json& object, const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(const json* array, array_field(object, path, "shape"));
  std::vector<int64_t> shape;
  for (size_t i = 0; i < array->size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(int64_t dim, read_i64((*array)[i], at(at(path, "shape"), i), 0, kMaxDim));
    shape.push_back(dim);
  }
  return shape;
}

Result<std::vector<graph::Dim>> dims_field(const json& object, const std::string& path,
                                           bool strict) {
  constexpr int64_t kMax = kMaxDim;
  KVRT_ASSIGN_OR_RETURN(const json* array, array_field(object, path, "shape"));
  std::vector<graph::Dim> shape;
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string dim_path = at(at(path, "shape"), i);
    const json& dim = (*array)[i];
    if (dim.is_number()) {
      KVRT_ASSIGN_OR_RETURN(int64_t size, read_i64(dim, dim_path, 0, kMax));
      shape.push_back(graph::Dim::fixed(size));
      continue;
    }
    KVRT_RETURN_IF_ERROR(known_keys(dim, dim_path, strict, {"symbol", "min", "max"}));
    KVRT_ASSIGN_OR_RETURN(std::string symbol, string_field(dim, dim_path, "symbol"));
    if (symbol.empty()) return field_error(at(dim_path, "symbol"), "empty symbol");
    KVRT_ASSIGN_OR_RETURN(const json* min, member(dim, dim_path, "min"));
    KVRT_ASSIGN_OR_RETURN(const json* max, member(dim, dim_path, "max"));
    KVRT_ASSIGN_OR_RETURN(int64_t lo, read_i64(*min, at(dim_path, "min"), 0, kMax));
    KVRT_ASSIGN_OR_RETURN(int64_t hi, read_i64(*max, at(dim_path, "max"), lo, kMax));
    shape.push_back(graph::Dim::dynamic(symbol, lo, hi));
  }
  return shape;
}

Result<std::vector<ValueIndex>> indices_field(const json& object, const std::string& path,
                                              std::string_view key) {
  KVRT_ASSIGN_OR_RETURN(const json* array, array_field(object, path, key));
  std::vector<ValueIndex> out;
  for (size_t i = 0; i < array->size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(int64_t index, read_i64((*array)[i], at(at(path, key), i), 0,
                                                  std::numeric_limits<ValueIndex>::max()));
    out.push_back(static_cast<ValueIndex>(index));
  }
  return out;
}

Result<ValueIndex> index_field(const json& object, const std::string& path, std::string_view key) {
  KVRT_ASSIGN_OR_RETURN(const json* value, member(object, path, key));
  KVRT_ASSIGN_OR_RETURN(int64_t index,
                        read_i64(*value, at(path, key), 0, std::numeric_limits<ValueIndex>::max()));
  return static_cast<ValueIndex>(index);
}

json dims_to_json(const std::vector<graph::Dim>& shape) {
  json out = json::array();
  for (const auto& dim : shape) {
    if (dim.is_dynamic()) {
      out.push_back({{"symbol", dim.symbol}, {"min", dim.min}, {"max", dim.max}});
    } else {
      out.push_back(dim.size);
    }
  }
  return out;
}

void storage_to_json(const Storage& storage, json& value) {
  switch (storage.kind) {
    case StorageKind::kInput:
      value["storage"] = "input";
      break;
    case StorageKind::kPlanned:
      value["storage"] = "planned";
      value["arena"] = arena_name(storage.arena);
      value["offset"] = storage.offset;
      value["nbytes"] = storage.nbytes;
      break;
    case StorageKind::kBuffer:
      value["storage"] = "buffer:" + storage.name;
      break;
    case StorageKind::kWeight:
      value["storage"] = "weight:" + storage.name;
      break;
  }
}

Result<Storage> storage_from_json(const json& value, const std::string& path, bool strict) {
  KVRT_ASSIGN_OR_RETURN(std::string text, string_field(value, path, "storage"));
  Storage storage;
  auto prefixed = [&](std::string_view prefix) {
    return text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
  };
  if (text != "planned") {
    KVRT_RETURN_IF_ERROR(known_keys(value, path, strict, {"name", "dtype", "shape", "storage"}));
  }
  if (text == "input") {
    storage.kind = StorageKind::kInput;
  } else if (text == "planned") {
    KVRT_RETURN_IF_ERROR(known_keys(
        value, path, strict, {"name", "dtype", "shape", "storage", "arena", "offset", "nbytes"}));
    storage.kind = StorageKind::kPlanned;
    KVRT_ASSIGN_OR_RETURN(std::string arena, string_field(value, path, "arena"));
    auto parsed = parse_arena(arena);
    if (!parsed.ok()) return field_error(at(path, "arena"), "unknown arena '" + arena + "'");
    storage.arena = *parsed;
    KVRT_ASSIGN_OR_RETURN(storage.offset, u64_field(value, path, "offset"));
    KVRT_ASSIGN_OR_RETURN(storage.nbytes, u64_field(value, path, "nbytes"));
  } else if (prefixed("buffer:")) {
    storage.kind = StorageKind::kBuffer;
    storage.name = text.substr(7);
  } else if (prefixed("weight:")) {
    storage.kind = StorageKind::kWeight;
    storage.name = text.substr(7);
  } else {
    return field_error(at(path, "storage"), "unknown storage '" + text + "'");
  }
  return storage;
}

json instruction_to_json(const Instruction& instruction) {
  if (const auto* call = std::get_if<DelegateCall>(&instruction)) {
    return {{"kind", "delegate_call"},
            {"delegate", call->delegate},
            {"num_inputs", call->num_inputs},
            {"args", call->args}};
  }
  if (const auto* kernel = std::get_if<HostKernel>(&instruction)) {
    return {{"kind", "host_kernel"},      {"op", kernel->op},
            {"node", kernel->node},       {"inputs", kernel->inputs},
            {"outputs", kernel->outputs}, {"attributes", kernel->attributes}};
  }
  const auto& copy = std::get<CopyInstruction>(instruction);
  return {{"kind", "copy"}, {"src", copy.src}, {"dst", copy.dst}, {"nbytes", copy.nbytes}};
}

Result<Instruction> instruction_from_json(const json& value, const std::string& path, bool strict) {
  KVRT_ASSIGN_OR_RETURN(std::string kind, string_field(value, path, "kind"));
  if (kind == "delegate_call") {
    KVRT_RETURN_IF_ERROR(
        known_keys(value, path, strict, {"kind", "delegate", "num_inputs", "args"}));
    DelegateCall call;
    KVRT_ASSIGN_OR_RETURN(call.delegate, index_field(value, path, "delegate"));
    KVRT_ASSIGN_OR_RETURN(uint64_t num_inputs, u64_field(value, path, "num_inputs"));
    if (num_inputs > std::numeric_limits<uint32_t>::max()) {
      return field_error(at(path, "num_inputs"), "out of range");
    }
    call.num_inputs = static_cast<uint32_t>(num_inputs);
    KVRT_ASSIGN_OR_RETURN(call.args, indices_field(value, path, "args"));
    return Instruction(std::move(call));
  }
  if (kind == "host_kernel") {
    KVRT_RETURN_IF_ERROR(
        known_keys(value, path, strict, {"kind", "op", "node", "inputs", "outputs", "attributes"}));
    HostKernel kernel;
    KVRT_ASSIGN_OR_RETURN(kernel.op, string_field(value, path, "op"));
    KVRT_ASSIGN_OR_RETURN(kernel.node, string_field(value, path, "node"));
    KVRT_ASSIGN_OR_RETURN(kernel.inputs, indices_field(value, path, "inputs"));
    KVRT_ASSIGN_OR_RETURN(kernel.outputs, indices_field(value, path, "outputs"));
    KVRT_ASSIGN_OR_RETURN(const json* attributes, member(value, path, "attributes"));
    if (!attributes->is_object()) return field_error(at(path, "attributes"), "expected object");
    kernel.attributes = *attributes;
    return Instruction(std::move(kernel));
  }
  if (kind == "copy") {
    KVRT_RETURN_IF_ERROR(known_keys(value, path, strict, {"kind", "src", "dst", "nbytes"}));
    CopyInstruction copy;
    KVRT_ASSIGN_OR_RETURN(copy.src, index_field(value, path, "src"));
    KVRT_ASSIGN_OR_RETURN(copy.dst, index_field(value, path, "dst"));
    KVRT_ASSIGN_OR_RETURN(copy.nbytes, u64_field(value, path, "nbytes"));
    return Instruction(copy);
  }
  return field_error(at(path, "kind"), "unknown instruction kind '" + kind + "'");
}

Result<MethodSpec> method_from_json(const json& value, const std::string& path, bool strict) {
  MethodSpec method;
  KVRT_RETURN_IF_ERROR(known_keys(
      value, path, strict,
      {"name", "values", "inputs", "outputs", "instructions", "mutations", "memory_plan"}));
  KVRT_ASSIGN_OR_RETURN(method.name, string_field(value, path, "name"));
  KVRT_ASSIGN_OR_RETURN(const json* values, array_field(value, path, "values"));
  for (size_t i = 0; i < values->size(); ++i) {
    const std::string value_path = at(at(path, "values"), i);
    const json& entry = (*values)[i];
    ValueSpec spec;
    KVRT_ASSIGN_OR_RETURN(spec.name, string_field(entry, value_path, "name"));
    KVRT_ASSIGN_OR_RETURN(spec.dtype, dtype_field(entry, value_path));
    KVRT_ASSIGN_OR_RETURN(spec.shape, dims_field(entry, value_path, strict));
    KVRT_ASSIGN_OR_RETURN(spec.storage, storage_from_json(entry, value_path, strict));
    method.values.push_back(std::move(spec));
  }
  KVRT_ASSIGN_OR_RETURN(method.inputs, indices_field(value, path, "inputs"));
  KVRT_ASSIGN_OR_RETURN(method.outputs, indices_field(value, path, "outputs"));
  KVRT_ASSIGN_OR_RETURN(const json* instructions, array_field(value, path, "instructions"));
  for (size_t i = 0; i < instructions->size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(
        Instruction instruction,
        instruction_from_json((*instructions)[i], at(at(path, "instructions"), i), strict));
    method.instructions.push_back(std::move(instruction));
  }
  KVRT_ASSIGN_OR_RETURN(const json* mutations, array_field(value, path, "mutations"));
  for (size_t i = 0; i < mutations->size(); ++i) {
    const std::string mutation_path = at(at(path, "mutations"), i);
    MutationSpec mutation;
    KVRT_RETURN_IF_ERROR(known_keys((*mutations)[i], mutation_path, strict, {"buffer", "value"}));
    KVRT_ASSIGN_OR_RETURN(mutation.buffer, string_field((*mutations)[i], mutation_path, "buffer"));
    KVRT_ASSIGN_OR_RETURN(mutation.value, index_field((*mutations)[i], mutation_path, "value"));
    method.mutations.push_back(std::move(mutation));
  }
  KVRT_ASSIGN_OR_RETURN(const json* plan, member(value, path, "memory_plan"));
  const std::string plan_path = at(path, "memory_plan");
  KVRT_RETURN_IF_ERROR(known_keys(*plan, plan_path, strict, {"device", "host"}));
  KVRT_ASSIGN_OR_RETURN(method.device_arena_bytes, u64_field(*plan, plan_path, "device"));
  KVRT_ASSIGN_OR_RETURN(method.host_arena_bytes, u64_field(*plan, plan_path, "host"));
  // Sizes that no machine holds are refused here, naming the field, before any
  // arithmetic on them or any allocator sees them.
  for (auto [key, bytes] : {std::pair{"device", method.device_arena_bytes},
                            std::pair{"host", method.host_arena_bytes}}) {
    if (bytes > detail::kMaxPlausibleBytes) {
      return field_error(at(plan_path, key),
                         std::to_string(bytes) + " bytes is implausible (the limit is 2^48)");
    }
  }
  return method;
}

}  // namespace

std::string_view arena_name(Arena arena) {
  return arena == Arena::kDevice ? "device" : "host";
}

Result<Arena> parse_arena(std::string_view name) {
  if (name == "device") return Arena::kDevice;
  if (name == "host") return Arena::kHost;
  return invalid_argument("unknown arena '", name, "' (expected device or host)");
}

json program_metadata_json(const ProgramSpec& spec) {
  json buffers = json::array();
  for (const auto& buffer : spec.buffers) {
    json copies = json::object();
    for (const auto& [method, bytes] : buffer.copy_bytes_per_step) copies[method] = bytes;
    buffers.push_back({{"name", buffer.name},
                       {"dtype", dtype_name(buffer.dtype)},
                       {"shape", buffer.shape},
                       {"arena", arena_name(buffer.arena)},
                       {"copy_bytes_per_step", copies}});
  }
  json methods = json::array();
  for (const auto& method : spec.methods) {
    json values = json::array();
    for (const auto& value : method.values) {
      json entry = {{"name", value.name},
                    {"dtype", dtype_name(value.dtype)},
                    {"shape", dims_to_json(value.shape)}};
      storage_to_json(value.storage, entry);
      values.push_back(std::move(entry));
    }
    json instructions = json::array();
    for (const auto& instruction : method.instructions) {
      instructions.push_back(instruction_to_json(instruction));
    }
    json mutations = json::array();
    for (const auto& mutation : method.mutations) {
      mutations.push_back({{"buffer", mutation.buffer}, {"value", mutation.value}});
    }
    methods.push_back(
        {{"name", method.name},
         {"values", std::move(values)},
         {"inputs", method.inputs},
         {"outputs", method.outputs},
         {"instructions", std::move(instructions)},
         {"mutations", std::move(mutations)},
         {"memory_plan",
          {{"device", method.device_arena_bytes}, {"host", method.host_arena_bytes}}}});
  }
  return {{"format", "kvrt-program"},      {"required_features", spec.required_features},
          {"producer", spec.producer},     {"weights", detail::weights_to_json(spec.weights)},
          {"buffers", std::move(buffers)}, {"delegates", detail::delegates_to_json(spec.delegates)},
          {"methods", std::move(methods)}};
}

namespace detail {

json weights_to_json(const std::vector<WeightSpec>& table) {
  json weights = json::array();
  for (const auto& weight : table) {
    weights.push_back({{"name", weight.name},
                       {"dtype", dtype_name(weight.dtype)},
                       {"shape", weight.shape},
                       {"offset", weight.offset},
                       {"nbytes", weight.nbytes}});
  }
  return weights;
}

json delegates_to_json(const std::vector<DelegateSpec>& table) {
  json delegates = json::array();
  for (const auto& delegate : table) {
    delegates.push_back({{"backend", delegate.backend},
                         {"method", delegate.method},
                         {"offset", delegate.offset},
                         {"size", delegate.size}});
  }
  return delegates;
}

Result<std::vector<WeightSpec>> weights_from_json(const json& root, bool strict) {
  std::vector<WeightSpec> out;
  KVRT_ASSIGN_OR_RETURN(const json* weights, array_field(root, "", "weights"));
  for (size_t i = 0; i < weights->size(); ++i) {
    const std::string path = at(std::string("weights"), i);
    const json& entry = (*weights)[i];
    WeightSpec weight;
    KVRT_RETURN_IF_ERROR(
        known_keys(entry, path, strict, {"name", "dtype", "shape", "offset", "nbytes"}));
    KVRT_ASSIGN_OR_RETURN(weight.name, string_field(entry, path, "name"));
    KVRT_ASSIGN_OR_RETURN(weight.dtype, dtype_field(entry, path));
    KVRT_ASSIGN_OR_RETURN(weight.shape, static_shape_field(entry, path));
    KVRT_ASSIGN_OR_RETURN(weight.offset, u64_field(entry, path, "offset"));
    KVRT_ASSIGN_OR_RETURN(weight.nbytes, u64_field(entry, path, "nbytes"));
    out.push_back(std::move(weight));
  }
  return out;
}

Result<std::vector<DelegateSpec>> delegates_from_json(const json& root, bool strict) {
  std::vector<DelegateSpec> out;
  KVRT_ASSIGN_OR_RETURN(const json* delegates, array_field(root, "", "delegates"));
  for (size_t i = 0; i < delegates->size(); ++i) {
    const std::string path = at(std::string("delegates"), i);
    const json& entry = (*delegates)[i];
    DelegateSpec delegate;
    KVRT_RETURN_IF_ERROR(known_keys(entry, path, strict, {"backend", "method", "offset", "size"}));
    KVRT_ASSIGN_OR_RETURN(delegate.backend, string_field(entry, path, "backend"));
    KVRT_ASSIGN_OR_RETURN(delegate.method, string_field(entry, path, "method"));
    KVRT_ASSIGN_OR_RETURN(delegate.offset, u64_field(entry, path, "offset"));
    KVRT_ASSIGN_OR_RETURN(delegate.size, u64_field(entry, path, "size"));
    out.push_back(std::move(delegate));
  }
  return out;
}

Result<ProgramSpec> program_spec_from_json(const json& root, bool strict) {
  ProgramSpec spec;
  KVRT_RETURN_IF_ERROR(known_keys(
      root, "", strict,
      {"format", "required_features", "producer", "weights", "buffers", "delegates", "methods"}));
  KVRT_ASSIGN_OR_RETURN(std::string format, string_field(root, "", "format"));
  if (format != "kvrt-program") return field_error("format", "expected 'kvrt-program'");
  KVRT_ASSIGN_OR_RETURN(const json* features, array_field(root, "", "required_features"));
  for (size_t i = 0; i < features->size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(std::string feature,
                          read_string((*features)[i], at(std::string("required_features"), i)));
    spec.required_features.push_back(std::move(feature));
  }
  if (auto it = root.find("producer"); it != root.end()) spec.producer = *it;

  KVRT_ASSIGN_OR_RETURN(spec.weights, weights_from_json(root, strict));

  KVRT_ASSIGN_OR_RETURN(const json* buffers, array_field(root, "", "buffers"));
  for (size_t i = 0; i < buffers->size(); ++i) {
    const std::string path = at(std::string("buffers"), i);
    const json& entry = (*buffers)[i];
    BufferSpec buffer;
    KVRT_RETURN_IF_ERROR(known_keys(entry, path, strict,
                                    {"name", "dtype", "shape", "arena", "copy_bytes_per_step"}));
    KVRT_ASSIGN_OR_RETURN(buffer.name, string_field(entry, path, "name"));
    KVRT_ASSIGN_OR_RETURN(buffer.dtype, dtype_field(entry, path));
    KVRT_ASSIGN_OR_RETURN(buffer.shape, static_shape_field(entry, path));
    KVRT_ASSIGN_OR_RETURN(std::string arena, string_field(entry, path, "arena"));
    auto parsed = parse_arena(arena);
    if (!parsed.ok()) return field_error(at(path, "arena"), "unknown arena '" + arena + "'");
    buffer.arena = *parsed;
    KVRT_ASSIGN_OR_RETURN(const json* copies, member(entry, path, "copy_bytes_per_step"));
    if (!copies->is_object()) {
      return field_error(at(path, "copy_bytes_per_step"), "expected an object");
    }
    for (const auto& [method, bytes] : copies->items()) {
      KVRT_ASSIGN_OR_RETURN(buffer.copy_bytes_per_step[method],
                            read_u64(bytes, at(at(path, "copy_bytes_per_step"), method)));
    }
    spec.buffers.push_back(std::move(buffer));
  }

  KVRT_ASSIGN_OR_RETURN(spec.delegates, delegates_from_json(root, strict));

  KVRT_ASSIGN_OR_RETURN(const json* methods, array_field(root, "", "methods"));
  for (size_t i = 0; i < methods->size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(MethodSpec method,
                          method_from_json((*methods)[i], at(std::string("methods"), i), strict));
    spec.methods.push_back(std::move(method));
  }
  return spec;
}

}  // namespace detail
}  // namespace kvrt::format
