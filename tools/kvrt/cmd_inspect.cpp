// `kvrt inspect FILE [--json]`: describes a kvrt file, recognized by its leading magic.
// A corrupted or unknown file gives a one-line error on stderr and exit code 1.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "command.h"
#include "kvrt/core/mapped_file.h"
#include "kvrt/export/inspect.h"
#include "kvrt/format/blob.h"
#include "kvrt/format/program.h"
#include "kvrt/format/program_engine.h"

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using kvrt::Status;

struct InspectOptions {
  std::string path;
  bool json = false;
};

// Prints a description of `bytes` to stdout, or returns why it cannot.
using Describe = Status (*)(std::span<const std::byte> bytes, const InspectOptions& options);

std::string json_quoted(std::string_view text) {
  return json(text).dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

void print_bindings(const char* side, const std::vector<kvrt::format::BindingSpec>& bindings,
                    size_t first_argument) {
  std::printf("%s (%zu):\n", side, bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    const auto& binding = bindings[i];
    std::printf("  [%zu] arg %zu  %s  %s  %s\n", i, first_argument + i,
                json_quoted(binding.name).c_str(),
                std::string(kvrt::dtype_name(binding.dtype)).c_str(),
                kvrt::format::shape_to_string(binding.shape).c_str());
  }
}

// JSON output keeps a reading order (ordered_json), unlike the blob's sorted keys.
ordered_json bindings_json(const std::vector<kvrt::format::BindingSpec>& bindings,
                           size_t first_argument) {
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < bindings.size(); ++i) {
    ordered_json shape = ordered_json::array();
    for (const kvrt::graph::Dim& dim : bindings[i].shape) {
      shape.push_back(dim.is_dynamic()
                          ? ordered_json{{"symbol", dim.symbol}, {"min", dim.min}, {"max", dim.max}}
                          : ordered_json(dim.size));
    }
    out.push_back({{"index", i},
                   {"argument", first_argument + i},  // delegate argument position (A3)
                   {"name", bindings[i].name},
                   {"dtype", kvrt::dtype_name(bindings[i].dtype)},
                   {"shape", shape}});
  }
  return out;
}

Status describe_blob(std::span<const std::byte> bytes, const InspectOptions& options) {
  KVRT_ASSIGN_OR_RETURN(kvrt::format::Blob blob, kvrt::format::read_blob(bytes));
  const auto& metadata = blob.metadata;
  const size_t num_inputs = metadata.inputs.size();
  const auto payload_offset = static_cast<size_t>(blob.payload.data() - bytes.data());
  if (options.json) {
    ordered_json aliases = ordered_json::array();
    for (const auto& alias : metadata.aliases) {
      aliases.push_back({{"output", alias.output},
                         {"input", alias.input},
                         {"kind", kvrt::format::alias_kind_name(alias.kind)}});
    }
    const ordered_json out = {
        {"file", options.path},
        {"kind", "delegate_blob"},
        {"size", bytes.size()},
        {"version", {{"major", blob.version_major}, {"minor", blob.version_minor}}},
        {"required_features", blob.required_features},
        {"target_device", metadata.target_device},
        {"producer", ordered_json(metadata.producer)},
        {"inputs", bindings_json(metadata.inputs, 0)},
        {"outputs", bindings_json(metadata.outputs, num_inputs)},
        {"aliases", aliases},
        {"payload", {{"offset", payload_offset}, {"size", blob.payload.size()}}},
    };
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return Status();
  }
  std::string features;
  for (const std::string& feature : blob.required_features) {
    features += (features.empty() ? "" : ", ") + feature;
  }
  std::printf("kvrt delegate blob, format %u.%u, %zu bytes\n", blob.version_major,
              blob.version_minor, bytes.size());
  std::printf("required features: %s\n", features.empty() ? "none" : features.c_str());
  std::printf("target device: %s\n", metadata.target_device.c_str());
  std::printf("producer: %s\n",
              metadata.producer.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  print_bindings("inputs", metadata.inputs, 0);
  print_bindings("outputs", metadata.outputs, num_inputs);
  std::printf("aliases (%zu):\n", metadata.aliases.size());
  for (const auto& alias : metadata.aliases) {
    std::printf("  %s -> %s  %s\n", json_quoted(alias.output).c_str(),
                json_quoted(alias.input).c_str(),
                std::string(kvrt::format::alias_kind_name(alias.kind)).c_str());
  }
  std::printf("payload: %zu bytes at offset %zu\n", blob.payload.size(), payload_offset);
  return Status();
}

// Program and engine files: methods, instructions, delegate bindings in argument order,
// aliases, buffers with their arena and per-step copy bytes, weights (export/inspect.h).
Status describe_program(std::span<const std::byte> bytes, const InspectOptions& options) {
  KVRT_ASSIGN_OR_RETURN(std::string text,
                        kvrt::exporter::inspect_program_bytes(bytes, options.json));
  std::fputs(text.c_str(), stdout);
  return Status();
}

Status describe_engine_file(std::span<const std::byte> bytes, const InspectOptions& options) {
  KVRT_ASSIGN_OR_RETURN(std::string text,
                        kvrt::exporter::inspect_engine_bytes(bytes, options.json));
  std::fputs(text.c_str(), stdout);
  return Status();
}

// Every kind of file inspect describes, by the 8-byte magic it starts with. A new
// format joins by adding a row.
struct FileKind {
  std::string_view magic;
  std::string_view what;
  Describe describe;
};
constexpr FileKind kFileKinds[] = {
    {{kvrt::format::kBlobMagic, sizeof(kvrt::format::kBlobMagic)}, "delegate blob", describe_blob},
    {{kvrt::format::kProgramMagic, sizeof(kvrt::format::kProgramMagic)},
     "program",
     describe_program},
    {{kvrt::format::kEngineFileMagic, sizeof(kvrt::format::kEngineFileMagic)},
     "engine file",
     describe_engine_file},
};

Status describe(std::span<const std::byte> bytes, const InspectOptions& options) {
  if (bytes.empty()) return kvrt::invalid_argument("empty file");
  const std::string_view head(reinterpret_cast<const char*>(bytes.data()),
                              std::min<size_t>(bytes.size(), 8));
  std::string known;
  for (const FileKind& kind : kFileKinds) {
    // Dispatch on the magic alone (a file cut inside its magic included); the describer
    // validates everything else.
    if (!head.empty() && kind.magic.starts_with(head)) {
      return kind.describe(bytes, options);
    }
    known +=
        (known.empty() ? "" : ", ") + std::string(kind.magic) + " (" + std::string(kind.what) + ")";
  }
  std::string seen;
  for (char c : head) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      seen += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
      seen += escaped;
    }
  }
  return kvrt::invalid_argument("unknown file type: magic '", seen, "', expected one of ", known);
}

// Every error names the file once: an open error already does.
Status inspect(const InspectOptions& options) {
  KVRT_ASSIGN_OR_RETURN(kvrt::MappedFile file, kvrt::MappedFile::open(options.path));
  return describe(file.bytes(), options).with_context("'" + options.path + "'");
}

const bool registered = kvrt::cli::register_command(
    {"inspect", "Describe a kvrt file (program, engine file, delegate blob)", [](CLI::App& sub) {
       auto options = std::make_shared<InspectOptions>();
       sub.add_option("file", options->path, "File to describe")->required();
       sub.add_flag("--json", options->json, "Print one JSON object instead of text");
       sub.footer(
           "A program file: its methods, bindings in delegate-argument order, aliases, the\n"
           "memory plan, mutable buffers and the bytes each decode step copies (F3). An\n"
           "engine file or a delegate blob: its header, features and bindings.\n\n"
           "Examples:\n"
           "  kvrt inspect model.kvrt\n"
           "  kvrt inspect model.kvrt --json");
       sub.callback([options] {
         const Status status = inspect(*options);
         if (!status.ok()) {
           std::fprintf(stderr, "kvrt inspect: %s\n", status.to_string().c_str());
           kvrt::cli::set_exit_code(1);
         }
       });
     }});

}  // namespace
