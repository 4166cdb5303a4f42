#include "kvrt/export/inspect.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "kvrt/core/mapped_file.h"
#include "kvrt/format/blob.h"
#include "kvrt/graph/graph.h"

namespace kvrt::exporter {
namespace {

using nlohmann::json;

json dims_json(const std::vector<graph::Dim>& shape) {
  json out = json::array();
  for (const graph::Dim& dim : shape) {
    if (dim.is_dynamic()) {
      out.push_back(dim.symbol + "<=" + std::to_string(dim.max));
    } else {
      out.push_back(dim.size);
    }
  }
  return out;
}

std::string storage_text(const format::Storage& storage) {
  switch (storage.kind) {
    case format::StorageKind::kInput:
      return "input";
    case format::StorageKind::kPlanned:
      return "planned " + std::string(format::arena_name(storage.arena)) + "@" +
             std::to_string(storage.offset);
    case format::StorageKind::kBuffer:
      return "buffer " + storage.name;
    case format::StorageKind::kWeight:
      return "weight " + storage.name;
  }
  return "?";
}

json value_json(const format::MethodSpec& method, format::ValueIndex v) {
  const format::ValueSpec& value = method.values[static_cast<size_t>(v)];
  return {{"value", v},
          {"name", value.name},
          {"dtype", dtype_name(value.dtype)},
          {"shape", dims_json(value.shape)},
          {"storage", storage_text(value.storage)}};
}

// A delegate's blob: target, payload size, node range, bindings and aliases.
json blob_json(std::span<const std::byte> bytes) {
  auto blob = format::read_blob(bytes);
  if (!blob.ok()) return {{"error", blob.status().to_string()}};
  json out = {{"blob_bytes", bytes.size()},
              {"payload_bytes", blob->payload.size()},
              {"target_device", blob->metadata.target_device},
              {"required_features", blob->required_features}};
  auto sub = graph::graph_from_json_text(
      std::string_view(reinterpret_cast<const char*>(blob->payload.data()), blob->payload.size()),
      "payload");
  if (sub.ok()) out["nodes"] = sub->nodes.size();
  json aliases = json::array();
  for (const format::AliasSpec& alias : blob->metadata.aliases) {
    aliases.push_back({{"output", alias.output},
                       {"input", alias.input},
                       {"kind", format::alias_kind_name(alias.kind)}});
  }
  out["aliases"] = std::move(aliases);
  out["producer"] = blob->metadata.producer;
  json inputs = json::array(), outputs = json::array();
  for (const auto& binding : blob->metadata.inputs) inputs.push_back(binding.name);
  for (const auto& binding : blob->metadata.outputs) outputs.push_back(binding.name);
  out["input_bindings"] = std::move(inputs);
  out["output_bindings"] = std::move(outputs);
  return out;
}

json instruction_json(const format::ProgramView& program, const format::MethodSpec& method,
                      const format::Instruction& instruction) {
  if (const auto* call = std::get_if<format::DelegateCall>(&instruction)) {
    json inputs = json::array(), outputs = json::array();
    for (size_t a = 0; a < call->args.size(); ++a) {
      (a < call->num_inputs ? inputs : outputs).push_back(value_json(method, call->args[a]));
    }
    json out = blob_json(program.blobs[static_cast<size_t>(call->delegate)]);
    out["kind"] = "delegate_call";
    out["delegate"] = call->delegate;
    out["backend"] = program.spec.delegates[static_cast<size_t>(call->delegate)].backend;
    out["inputs"] = std::move(inputs);
    out["outputs"] = std::move(outputs);
    return out;
  }
  if (const auto* kernel = std::get_if<format::HostKernel>(&instruction)) {
    json inputs = json::array(), outputs = json::array();
    for (format::ValueIndex v : kernel->inputs) inputs.push_back(value_json(method, v));
    for (format::ValueIndex v : kernel->outputs) outputs.push_back(value_json(method, v));
    return {{"kind", "host_kernel"},
            {"op", kernel->op},
            {"node", kernel->node},
            {"inputs", std::move(inputs)},
            {"outputs", std::move(outputs)}};
  }
  const auto& copy = std::get<format::CopyInstruction>(instruction);
  return {{"kind", "copy"},
          {"src", value_json(method, copy.src)},
          {"dst", value_json(method, copy.dst)},
          {"nbytes", copy.nbytes}};
}

json weights_json(const std::vector<format::WeightSpec>& weights) {
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_dtype;
  for (const auto& weight : weights) {
    total += weight.nbytes;
    by_dtype[std::string(dtype_name(weight.dtype))] += weight.nbytes;
  }
  return {{"count", weights.size()}, {"bytes", total}, {"bytes_by_dtype", by_dtype}};
}

std::string bytes_text(uint64_t bytes) {
  char text[32];
  if (bytes < 10000) {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < 10000000) {
    std::snprintf(text, sizeof(text), "%.1f KB", static_cast<double>(bytes) / 1e3);
  } else if (bytes < 1000000000ull) {
    std::snprintf(text, sizeof(text), "%.1f MB", static_cast<double>(bytes) / 1e6);
  } else {
    std::snprintf(text, sizeof(text), "%.2f GB", static_cast<double>(bytes) / 1e9);
  }
  return text;
}

std::string shape_text(const json& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i].is_string() ? shape[i].get<std::string>()
                                : std::to_string(shape[i].get<int64_t>());
  }
  return out + "]";
}

std::string value_text(const json& value) {
  return value["name"].get<std::string>() + " " + value["dtype"].get<std::string>() + " " +
         shape_text(value["shape"]) + " (" + value["storage"].get<std::string>() + ")";
}

void render_instruction(std::ostringstream& out, size_t index, const json& instruction) {
  const std::string kind = instruction["kind"];
  out << "    [" << index << "] ";
  if (kind == "copy") {
    out << "copy " << instruction["src"]["name"].get<std::string>() << " -> "
        << instruction["dst"]["name"].get<std::string>() << " ("
        << bytes_text(instruction["nbytes"]) << ", "
        << instruction["src"]["storage"].get<std::string>() << " -> "
        << instruction["dst"]["storage"].get<std::string>() << ")\n";
    return;
  }
  if (kind == "host_kernel") {
    out << "host_kernel " << instruction["op"].get<std::string>() << " '"
        << instruction["node"].get<std::string>() << "'\n";
    return;
  }
  out << "delegate_call #" << instruction["delegate"] << " ("
      << instruction["backend"].get<std::string>() << ", target "
      << instruction.value("target_device", "?") << ", " << instruction.value("nodes", 0)
      << " nodes, payload " << bytes_text(instruction.value("payload_bytes", 0)) << ")\n";
  size_t arg = 0;
  for (const char* side : {"inputs", "outputs"}) {
    for (const json& value : instruction[side]) {
      out << "          " << (std::string(side) == "inputs" ? "in " : "out") << " arg " << arg++
          << ": " << value_text(value) << "\n";
    }
  }
  for (const json& alias : instruction["aliases"]) {
    out << "          alias " << alias["output"].get<std::string>() << " -> "
        << alias["input"].get<std::string>() << " (" << alias["kind"].get<std::string>() << ")\n";
  }
}

}  // namespace

bool is_program_file(std::span<const std::byte> bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), format::kProgramMagic, 8) == 0;
}

bool is_engine_file(std::span<const std::byte> bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), format::kEngineFileMagic, 8) == 0;
}

json describe_program(const format::ProgramView& program) {
  const format::ProgramSpec& spec = program.spec;
  json buffers = json::array();
  for (const format::BufferSpec& buffer : spec.buffers) {
    uint64_t bytes = dtype_size(buffer.dtype);
    for (int64_t dim : buffer.shape) bytes *= static_cast<uint64_t>(dim);
    buffers.push_back({{"name", buffer.name},
                       {"dtype", dtype_name(buffer.dtype)},
                       {"shape", buffer.shape},
                       {"bytes", bytes},
                       {"arena", format::arena_name(buffer.arena)},
                       {"copy_bytes_per_step", buffer.copy_bytes_per_step}});
  }
  json methods = json::array();
  for (const format::MethodSpec& method : spec.methods) {
    json inputs = json::array(), outputs = json::array(), instructions = json::array();
    for (format::ValueIndex v : method.inputs) inputs.push_back(value_json(method, v));
    for (format::ValueIndex v : method.outputs) outputs.push_back(value_json(method, v));
    uint64_t copies = 0;
    for (const format::Instruction& instruction : method.instructions) {
      instructions.push_back(instruction_json(program, method, instruction));
      if (const auto* copy = std::get_if<format::CopyInstruction>(&instruction)) {
        copies += copy->nbytes;
      }
    }
    json mutations = json::array();
    for (const auto& mutation : method.mutations) {
      mutations.push_back({{"buffer", mutation.buffer},
                           {"value", method.values[static_cast<size_t>(mutation.value)].name}});
    }
    methods.push_back({{"name", method.name},
                       {"inputs", std::move(inputs)},
                       {"outputs", std::move(outputs)},
                       {"memory_plan",
                        {{"device", method.device_arena_bytes}, {"host", method.host_arena_bytes}}},
                       {"copy_bytes_per_step", copies},
                       {"mutations", std::move(mutations)},
                       {"instructions", std::move(instructions)}});
  }
  return {{"kind", "program"},
          {"version",
           std::to_string(program.version_major) + "." + std::to_string(program.version_minor)},
          {"required_features", spec.required_features},
          {"producer", spec.producer},
          {"weights", weights_json(spec.weights)},
          {"buffers", std::move(buffers)},
          {"methods", std::move(methods)}};
}

json describe_engine_file(const format::EngineFileView& engine) {
  json delegates = json::array();
  for (size_t d = 0; d < engine.spec.delegates.size(); ++d) {
    json entry = blob_json(engine.blobs[d]);
    entry["method"] = engine.spec.delegates[d].method;
    entry["backend"] = engine.spec.delegates[d].backend;
    delegates.push_back(std::move(entry));
  }
  return {{"kind", "engine"},
          {"version",
           std::to_string(engine.version_major) + "." + std::to_string(engine.version_minor)},
          {"required_features", engine.spec.required_features},
          {"producer", engine.spec.producer},
          {"weights", weights_json(engine.spec.weights)},
          {"delegates", std::move(delegates)}};
}

std::string render_description(const json& d) {
  std::ostringstream out;
  out << d["kind"].get<std::string>() << " file, format " << d["version"].get<std::string>()
      << ", required features: " << (d["required_features"].empty() ? "none" : "") <<
      [&] {
        std::string list;
        for (const auto& f : d["required_features"])
          list += (list.empty() ? "" : ", ") + f.get<std::string>();
        return list;
      }()
      << "\n";
  const json& weights = d["weights"];
  out << "weights: " << weights["count"] << " tensors, " << bytes_text(weights["bytes"]);
  for (const auto& [dtype, bytes] : weights["bytes_by_dtype"].items()) {
    out << " (" << dtype << " " << bytes_text(bytes) << ")";
  }
  out << "\n";
  if (d["kind"] == "engine") {
    for (const json& delegate : d["delegates"]) {
      out << "delegate for " << delegate["method"].get<std::string>() << ": "
          << delegate.value("nodes", 0) << " nodes, inputs";
      for (const auto& name : delegate["input_bindings"]) out << " " << name.get<std::string>();
      out << "; outputs";
      for (const auto& name : delegate["output_bindings"]) out << " " << name.get<std::string>();
      out << "\n";
      for (const json& alias : delegate["aliases"]) {
        out << "  alias " << alias["output"].get<std::string>() << " -> "
            << alias["input"].get<std::string>() << " (" << alias["kind"].get<std::string>()
            << ")\n";
      }
    }
    return out.str();
  }
  out << "buffers: " << d["buffers"].size() << "\n";
  for (const json& buffer : d["buffers"]) {
    out << "  " << buffer["name"].get<std::string>() << " " << buffer["dtype"].get<std::string>()
        << " " << shape_text(buffer["shape"]) << " " << bytes_text(buffer["bytes"]) << ", "
        << buffer["arena"].get<std::string>() << ", copy bytes/step:";
    uint64_t total = 0;
    for (const auto& [method, bytes] : buffer["copy_bytes_per_step"].items()) {
      out << " " << method << " " << bytes_text(bytes);
      total += bytes.get<uint64_t>();
    }
    out << (total == 0 ? " (zero-copy)" : " (explicit copy path)") << "\n";
  }
  for (const json& method : d["methods"]) {
    out << "method " << method["name"].get<std::string>() << ":\n    inputs:";
    for (const json& value : method["inputs"]) out << " " << value_text(value) << ";";
    out << "\n    outputs:";
    for (const json& value : method["outputs"]) out << " " << value_text(value) << ";";
    out << "\n    memory plan: device " << bytes_text(method["memory_plan"]["device"]) << ", host "
        << bytes_text(method["memory_plan"]["host"]) << "; copy bytes/step "
        << bytes_text(method["copy_bytes_per_step"]) << "; " << method["mutations"].size()
        << " mutations\n";
    size_t index = 0;
    for (const json& instruction : method["instructions"])
      render_instruction(out, index++, instruction);
  }
  return out.str();
}

namespace {

Result<std::string> print(const json& description, bool as_json) {
  try {
    return as_json ? description.dump(2, ' ', false, json::error_handler_t::replace) + "\n"
                   : render_description(description);
  } catch (const std::exception& e) {
    return internal_error("inspect: ", e.what());
  }
}

}  // namespace

Result<std::string> inspect_program_bytes(std::span<const std::byte> bytes, bool as_json) {
  KVRT_ASSIGN_OR_RETURN(format::ProgramView program, format::read_program(bytes));
  return print(describe_program(program), as_json);
}

Result<std::string> inspect_engine_bytes(std::span<const std::byte> bytes, bool as_json) {
  KVRT_ASSIGN_OR_RETURN(format::EngineFileView engine, format::read_engine_file(bytes));
  return print(describe_engine_file(engine), as_json);
}

Result<std::string> inspect_file(const std::string& path, bool as_json) {
  KVRT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  Result<std::string> out = internal_error("unreachable");
  if (is_program_file(file.bytes())) {
    out = inspect_program_bytes(file.bytes(), as_json);
  } else if (is_engine_file(file.bytes())) {
    out = inspect_engine_bytes(file.bytes(), as_json);
  } else {
    return invalid_argument("'", path, "' is not a kvrt program or engine file");
  }
  if (!out.ok()) return out.status().with_context("'" + path + "'");
  return out;
}

}  // namespace kvrt::exporter
