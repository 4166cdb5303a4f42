// The delegate blob: what the engine delegate receives at init. It is the contract
// between lowering and the runtime, so it fails closed (SYSTEM.md A1-A4). Byte
// layout and versioning rules: docs/blob-format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"
#include "kvrt/graph/graph.h"

namespace kvrt::format {

// Fixed header: magic, version, offsets and the required-features region; see
// docs/blob-format.md for the table.
inline constexpr char kBlobMagic[8] = {'K', 'V', 'R', 'T', 'B', 'L', 'O', 'B'};
inline constexpr uint16_t kBlobVersionMajor = 1;
inline constexpr uint16_t kBlobVersionMinor = 0;
inline constexpr uint64_t kBlobHeaderSize = 128;
inline constexpr uint64_t kBlobPayloadAlignment = 64;
// Required-feature names live in the header (bytes 48..127), NUL-terminated, so a
// reader can name a feature it does not know before it interprets anything else.
inline constexpr uint64_t kBlobFeaturesOffset = 48;
inline constexpr uint64_t kBlobFeaturesSize = 80;
inline constexpr size_t kBlobMaxFeatureNameLength = 31;
// JSON nesting deeper than this is refused (bounds recursion in copies and dumps).
inline constexpr int kBlobMaxJsonDepth = 32;

// Required-feature names. A reader refuses any required feature it does not know.
// `aliased_io`: the blob has aliases; required exactly when metadata.aliases is
// non-empty, so an alias-unaware reader can never bind a KV output to its own storage.
inline constexpr std::string_view kFeatureAliasedIo = "aliased_io";

// The features this reader implements.
std::span<const std::string_view> supported_blob_features();

struct BindingSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<graph::Dim> shape;  // dynamic dims carry min/max bounds
  bool operator==(const BindingSpec&) const = default;
};

enum class AliasKind : uint8_t {
  kKvCacheUpdate,  // engine writes the input's storage in place; engine states it (C1)
  kUser,           // declared by the producer only; trusted after shape/dtype match (C2)
};
// "kv_cache_update" or "user".
std::string_view alias_kind_name(AliasKind kind);

struct AliasSpec {
  std::string output;  // output binding name
  std::string input;   // input binding name whose storage the output is
  AliasKind kind = AliasKind::kKvCacheUpdate;
  bool operator==(const AliasSpec&) const = default;
};

struct BlobMetadata {
  // In delegate-argument order (A3): input i is argument i, output j is argument
  // inputs.size() + j. Names are unique across inputs and outputs together.
  std::vector<BindingSpec> inputs;
  std::vector<BindingSpec> outputs;
  std::vector<AliasSpec> aliases;
  std::string target_device = "any";                   // "cpu", "cuda" or "any"
  nlohmann::json producer = nlohmann::json::object();  // free-form, never interpreted
  bool operator==(const BlobMetadata&) const = default;
};

struct Blob {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  std::vector<std::string> required_features;
  BlobMetadata metadata;
  std::span<const std::byte> payload;  // view into the bytes given to read_blob
};

// Serializes; `aliased_io` becomes a required feature exactly when there are aliases.
// Static dims are written as their size (their min/max are not stored). Fails
// (InvalidArgument, message naming the field) on metadata that read_blob would
// reject: the produced bytes are read back before they are returned.
Result<std::vector<std::byte>> write_blob(const BlobMetadata& metadata,
                                          std::span<const std::byte> payload);

// Parses and validates everything (A1, A2). The returned payload points into `bytes`.
// Every failure is InvalidProgram with a message naming the field, e.g.
// "metadata.outputs[2].name: duplicate binding name 'logits' (also metadata.inputs[0])".
Result<Blob> read_blob(std::span<const std::byte> bytes);

// read_blob as a reader that implements only `supported` features would run it. For
// tests that simulate an older, alias-unaware reader (A1).
Result<Blob> read_blob_with_features(std::span<const std::byte> bytes,
                                     std::span<const std::string_view> supported);

// The metadata as stored in the blob (for inspect --json and graph dumps).
nlohmann::json metadata_to_json(const BlobMetadata& metadata);

// "[1, T=1..128, 64]": static dims as their size, dynamic ones as symbol=min..max.
std::string shape_to_string(std::span<const graph::Dim> shape);

// Index of an input/output binding by name, or -1.
int find_input(const BlobMetadata& metadata, std::string_view name);
int find_output(const BlobMetadata& metadata, std::string_view name);

}  // namespace kvrt::format
