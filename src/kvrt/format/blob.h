// The delegate blob: what the engine delegate receives at init. It is the contract
// between lowering and the runtime, so it fails closed (SYSTEM.md A1-A4). Byte
// layout and versioning rules: docs/blob-format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"
#include "kvrt/graph/graph.h"

namespace kvrt::format {

// Required-feature names. A reader refuses any required feature it does not know.
inline constexpr std::string_view kFeatureAliasedIo = "aliased_io";

struct BindingSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<graph::Dim> shape;  // dynamic dims carry min/max bounds
};

enum class AliasKind : uint8_t {
  kKvCacheUpdate,  // engine writes the input's storage in place; engine states it (C1)
  kUser,           // declared by the producer only; trusted after shape/dtype match (C2)
};
std::string_view alias_kind_name(AliasKind kind);

struct AliasSpec {
  std::string output;  // output binding name
  std::string input;   // input binding name whose storage the output is
  AliasKind kind = AliasKind::kKvCacheUpdate;
};

struct BlobMetadata {
  // In delegate-argument order (A3): input i is argument i, output j is argument
  // inputs.size() + j.
  std::vector<BindingSpec> inputs;
  std::vector<BindingSpec> outputs;
  std::vector<AliasSpec> aliases;
  std::string target_device = "any";  // "cpu", "cuda" or "any"
  nlohmann::json producer = nlohmann::json::object();  // free-form, never interpreted
};

struct Blob {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  std::vector<std::string> required_features;
  BlobMetadata metadata;
  std::span<const std::byte> payload;  // view into the bytes given to read_blob
};

// Serializes; `aliased_io` becomes a required feature exactly when there are aliases.
// Fails (InvalidArgument) on metadata that read_blob would reject.
Result<std::vector<std::byte>> write_blob(const BlobMetadata& metadata,
                                          std::span<const std::byte> payload);

// Parses and validates everything (A1, A2). The returned payload points into `bytes`.
Result<Blob> read_blob(std::span<const std::byte> bytes);

// Index of an input/output binding by name, or -1.
int find_input(const BlobMetadata& metadata, std::string_view name);
int find_output(const BlobMetadata& metadata, std::string_view name);

}  // namespace kvrt::format
