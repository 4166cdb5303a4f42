// The delegate blob's header and the reader/writer entry points. The reader checks
// in this order, so that nothing is interpreted before it is known to be meant for
// this reader: magic, major version, required features, then offsets and sizes, then
// the metadata (docs/blob-format.md).
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "kvrt/format/blob.h"
#include "kvrt/format/blob_internal.h"

namespace kvrt::format {
namespace {

constexpr std::array<std::string_view, 1> kSupportedFeatures = {kFeatureAliasedIo};

// Header field offsets; the table is in docs/blob-format.md.
constexpr size_t kVersionMajorAt = 8;
constexpr size_t kVersionMinorAt = 10;
constexpr size_t kHeaderSizeAt = 12;
constexpr size_t kMetadataOffsetAt = 16;
constexpr size_t kMetadataSizeAt = 24;
constexpr size_t kPayloadOffsetAt = 32;
constexpr size_t kPayloadSizeAt = 40;

uint64_t load_le(std::span<const std::byte> bytes, size_t at, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  }
  return value;
}

void store_le(std::vector<std::byte>& bytes, size_t at, size_t width, uint64_t value) {
  for (size_t i = 0; i < width; ++i) {
    bytes[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xffu);
  }
}

bool is_feature_name(std::string_view name) {
  if (name.empty() || name.size() > kBlobMaxFeatureNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The required-features region: names, each followed by one NUL; the list ends at an
// empty name or at the end of the region; everything after it is zero.
Result<std::vector<std::string>> parse_features(std::span<const std::byte> region) {
  const std::string_view text(reinterpret_cast<const char*>(region.data()), region.size());
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < text.size() && text[pos] != '\0') {
    const size_t end = text.find('\0', pos);
    const size_t at = kBlobFeaturesOffset + pos;
    if (end == std::string_view::npos) {
      return invalid_program("header.required_features: name at byte ", at,
                             " is not NUL-terminated");
    }
    const std::string_view name = text.substr(pos, end - pos);
    if (!is_feature_name(name)) {
      return invalid_program("header.required_features: malformed feature name '",
                             detail::printable(name, /*escape_high=*/true), "' at byte ", at,
                             " (expected 1-", kBlobMaxFeatureNameLength, " of [a-z0-9_])");
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return invalid_program("header.required_features: duplicate feature '", name, "'");
    }
    names.emplace_back(name);
    pos = end + 1;
  }
  for (size_t i = pos; i < text.size(); ++i) {
    if (text[i] != '\0') {
      return invalid_program("header.required_features: non-zero byte at ", kBlobFeaturesOffset + i,
                             " after the end of the list");
    }
  }
  return names;
}

// [offset, offset + size) inside a blob of `total` bytes, without overflowing.
Status check_range(std::string_view name, uint64_t offset, uint64_t size, uint64_t total) {
  if (offset > total || size > total - offset) {
    return invalid_program("header.", name, "_offset/", name, "_size: ", name, " at offset ",
                           offset, " with size ", size, " lies outside the ", total, "-byte blob");
  }
  return Status();
}

}  // namespace

std::span<const std::string_view> supported_blob_features() {
  return kSupportedFeatures;
}

std::string_view alias_kind_name(AliasKind kind) {
  switch (kind) {
    case AliasKind::kKvCacheUpdate:
      return "kv_cache_update";
    case AliasKind::kUser:
      return "user";
  }
  return "invalid";
}

Result<Blob> read_blob_with_features(std::span<const std::byte> bytes,
                                     std::span<const std::string_view> supported) {
  const uint64_t total = bytes.size();
  const size_t magic_bytes = std::min<size_t>(bytes.size(), sizeof(kBlobMagic));
  if (magic_bytes > 0 && std::memcmp(bytes.data(), kBlobMagic, magic_bytes) != 0) {
    const std::string_view seen(reinterpret_cast<const char*>(bytes.data()), magic_bytes);
    return invalid_program("unknown magic '", detail::printable(seen, /*escape_high=*/true),
                           "': not a kvrt delegate blob (expected 'KVRTBLOB')");
  }
  if (total < kBlobHeaderSize) {
    return invalid_program("truncated blob: ", total, " bytes, shorter than the ", kBlobHeaderSize,
                           "-byte header");
  }
  Blob blob;
  blob.version_major = static_cast<uint16_t>(load_le(bytes, kVersionMajorAt, 2));
  blob.version_minor = static_cast<uint16_t>(load_le(bytes, kVersionMinorAt, 2));
  if (blob.version_major != kBlobVersionMajor) {
    return invalid_program(
        "blob format version ", blob.version_major, ".", blob.version_minor,
        blob.version_major > kBlobVersionMajor ? " is newer than" : " is not supported by",
        " this reader (", kBlobVersionMajor, ".", kBlobVersionMinor, "); refusing it");
  }
  KVRT_ASSIGN_OR_RETURN(blob.required_features,
                        parse_features(bytes.subspan(kBlobFeaturesOffset, kBlobFeaturesSize)));
  for (const std::string& feature : blob.required_features) {
    if (std::find(supported.begin(), supported.end(), feature) == supported.end()) {
      return invalid_program("blob requires feature '", feature,
                             "' which this reader does not implement");
    }
  }

  const uint64_t header_size = load_le(bytes, kHeaderSizeAt, 4);
  const uint64_t metadata_offset = load_le(bytes, kMetadataOffsetAt, 8);
  const uint64_t metadata_size = load_le(bytes, kMetadataSizeAt, 8);
  const uint64_t payload_offset = load_le(bytes, kPayloadOffsetAt, 8);
  const uint64_t payload_size = load_le(bytes, kPayloadSizeAt, 8);
  if (header_size < kBlobHeaderSize || header_size > total) {
    return invalid_program("header.header_size: ", header_size, " is outside ", kBlobHeaderSize,
                           "..", total, " (the fixed header .. the blob size)");
  }
  KVRT_RETURN_IF_ERROR(check_range("metadata", metadata_offset, metadata_size, total));
  KVRT_RETURN_IF_ERROR(check_range("payload", payload_offset, payload_size, total));
  if (metadata_offset < header_size) {
    return invalid_program("header.metadata_offset: ", metadata_offset,
                           " overlaps the header (header_size ", header_size, ")");
  }
  if (metadata_size == 0) return invalid_program("header.metadata_size: metadata is empty");
  if (payload_offset % kBlobPayloadAlignment != 0) {
    return invalid_program("header.payload_offset: ", payload_offset, " is not a multiple of ",
                           kBlobPayloadAlignment);
  }
  if (payload_offset < metadata_offset + metadata_size) {
    return invalid_program("header.payload_offset: ", payload_offset,
                           " overlaps the metadata, which ends at ",
                           metadata_offset + metadata_size);
  }
  if (payload_offset + payload_size != total) {
    return invalid_program("blob has ", total - (payload_offset + payload_size),
                           " trailing bytes after the payload");
  }

  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + metadata_offset,
                              metadata_size);
  // A newer minor version may add keys; this reader ignores what it does not know.
  const bool strict_keys = blob.version_minor <= kBlobVersionMinor;
  KVRT_ASSIGN_OR_RETURN(blob.metadata, detail::parse_blob_metadata(text, strict_keys));
  KVRT_RETURN_IF_ERROR(detail::validate_blob_metadata(blob.metadata));

  const bool requires_aliased_io =
      std::find(blob.required_features.begin(), blob.required_features.end(), kFeatureAliasedIo) !=
      blob.required_features.end();
  if (!blob.metadata.aliases.empty() && !requires_aliased_io) {
    return invalid_program("metadata.aliases: the blob has ", blob.metadata.aliases.size(),
                           " aliases but does not require feature '", kFeatureAliasedIo, "'");
  }
  if (blob.metadata.aliases.empty() && requires_aliased_io) {
    return invalid_program("header.required_features: '", kFeatureAliasedIo,
                           "' is required but metadata.aliases is empty");
  }
  blob.payload = bytes.subspan(payload_offset, payload_size);
  return blob;
}

Result<Blob> read_blob(std::span<const std::byte> bytes) {
  return read_blob_with_features(bytes, supported_blob_features());
}

Result<std::vector<std::byte>> write_blob(const BlobMetadata& metadata,
                                          std::span<const std::byte> payload) {
  if (Status status = detail::validate_blob_metadata(metadata); !status.ok()) {
    return invalid_argument(status.message());
  }
  std::string text;
  try {
    text = metadata_to_json(metadata).dump(-1, ' ', /*ensure_ascii=*/false,
                                           nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& error) {
    return invalid_argument("metadata.producer: cannot be serialized: ",
                            detail::printable(error.what(), /*escape_high=*/true));
  }
  std::vector<std::string> features;
  if (!metadata.aliases.empty()) features.emplace_back(kFeatureAliasedIo);

  const uint64_t metadata_offset = kBlobHeaderSize;
  const uint64_t metadata_end = metadata_offset + text.size();
  const uint64_t payload_offset =
      (metadata_end + kBlobPayloadAlignment - 1) / kBlobPayloadAlignment * kBlobPayloadAlignment;
  std::vector<std::byte> out(payload_offset + payload.size(), std::byte{0});
  std::memcpy(out.data(), kBlobMagic, sizeof(kBlobMagic));
  store_le(out, kVersionMajorAt, 2, kBlobVersionMajor);
  store_le(out, kVersionMinorAt, 2, kBlobVersionMinor);
  store_le(out, kHeaderSizeAt, 4, kBlobHeaderSize);
  store_le(out, kMetadataOffsetAt, 8, metadata_offset);
  store_le(out, kMetadataSizeAt, 8, text.size());
  store_le(out, kPayloadOffsetAt, 8, payload_offset);
  store_le(out, kPayloadSizeAt, 8, payload.size());
  size_t at = kBlobFeaturesOffset;
  for (const std::string& feature : features) {
    std::memcpy(out.data() + at, feature.data(), feature.size());
    at += feature.size() + 1;  // the NUL is already there
  }
  std::memcpy(out.data() + metadata_offset, text.data(), text.size());
  if (!payload.empty()) std::memcpy(out.data() + payload_offset, payload.data(), payload.size());

  // The guarantee that a written blob is always readable, checked rather than assumed
  // (e.g. a producer nested too deeply is only caught here).
  auto check = read_blob(out);
  if (!check.ok()) return invalid_argument(check.status().message());
  if (check->metadata.producer != metadata.producer) {
    return invalid_argument(
        "metadata.producer: does not survive a JSON round trip (NaN, infinity or binary?)");
  }
  return out;
}

int find_input(const BlobMetadata& metadata, std::string_view name) {
  for (size_t i = 0; i < metadata.inputs.size(); ++i) {
    if (metadata.inputs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int find_output(const BlobMetadata& metadata, std::string_view name) {
  for (size_t i = 0; i < metadata.outputs.size(); ++i) {
    if (metadata.outputs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace kvrt::format
