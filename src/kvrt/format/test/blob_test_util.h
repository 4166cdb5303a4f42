// Helpers for blob tests and the fuzz seed-corpus generator: a sample decoder-step
// metadata, and a raw blob builder that can write headers the writer never would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/format/blob.h"

namespace kvrt::format::testing {

// A one-layer step: inputs tokens, position, k_cache.0, v_cache.0; outputs logits and
// the two caches' updates, aliased to their inputs. Binding names are deliberately not
// in sorted order (A3).
inline BlobMetadata sample_metadata() {
  using graph::Dim;
  BlobMetadata metadata;
  metadata.inputs = {
      {"tokens", DType::kI32, {Dim::fixed(1), Dim::dynamic("T", 1, 128)}},
      {"position", DType::kI32, {Dim::fixed(1)}},
      {"k_cache.0", DType::kF32, {Dim::fixed(2), Dim::fixed(64), Dim::fixed(16)}},
      {"v_cache.0", DType::kF32, {Dim::fixed(2), Dim::fixed(64), Dim::fixed(16)}},
  };
  metadata.outputs = {
      {"logits", DType::kF32, {Dim::fixed(1), Dim::fixed(32)}},
      {"k_cache.0.updated", DType::kF32, {Dim::fixed(2), Dim::fixed(64), Dim::fixed(16)}},
      {"v_cache.0.updated", DType::kF32, {Dim::fixed(2), Dim::fixed(64), Dim::fixed(16)}},
  };
  metadata.aliases = {{"k_cache.0.updated", "k_cache.0", AliasKind::kKvCacheUpdate},
                      {"v_cache.0.updated", "v_cache.0", AliasKind::kKvCacheUpdate}};
  metadata.target_device = "cuda";
  metadata.producer = {{"tool", "kvrt test"}, {"layers", 1}};
  return metadata;
}

// "ok", or the error as "InvalidProgram: metadata...", for substring assertions.
template <typename T>
std::string error_of(const Result<T>& result) {
  return result.ok() ? "ok" : result.status().to_string();
}

inline std::vector<std::byte> to_bytes(std::string_view text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return {data, data + text.size()};
}

inline void put_le(std::vector<std::byte>& bytes, size_t at, size_t width, uint64_t value) {
  for (size_t i = 0; i < width; ++i) {
    bytes[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xffu);
  }
}

// Header fields of a hand-built blob. Unset offsets and sizes are computed as the
// writer would; `trailing` appends that many bytes after the payload.
struct RawBlob {
  std::string magic = "KVRTBLOB";
  uint16_t major = kBlobVersionMajor;
  uint16_t minor = kBlobVersionMinor;
  uint32_t header_size = kBlobHeaderSize;
  std::vector<std::string> features;  // each written followed by one NUL
  std::string metadata;
  std::string payload;
  std::optional<uint64_t> metadata_offset, metadata_size, payload_offset, payload_size;
  size_t trailing = 0;
};

inline std::vector<std::byte> build_raw(const RawBlob& raw) {
  const uint64_t meta_end = kBlobHeaderSize + raw.metadata.size();
  const uint64_t payload_at =
      (meta_end + kBlobPayloadAlignment - 1) / kBlobPayloadAlignment * kBlobPayloadAlignment;
  std::vector<std::byte> out(payload_at + raw.payload.size() + raw.trailing, std::byte{0});
  for (size_t i = 0; i < raw.magic.size() && i < 8; ++i) out[i] = std::byte(raw.magic[i]);
  put_le(out, 8, 2, raw.major);
  put_le(out, 10, 2, raw.minor);
  put_le(out, 12, 4, raw.header_size);
  put_le(out, 16, 8, raw.metadata_offset.value_or(kBlobHeaderSize));
  put_le(out, 24, 8, raw.metadata_size.value_or(raw.metadata.size()));
  put_le(out, 32, 8, raw.payload_offset.value_or(payload_at));
  put_le(out, 40, 8, raw.payload_size.value_or(raw.payload.size()));
  size_t at = kBlobFeaturesOffset;
  for (const std::string& feature : raw.features) {
    for (char c : feature) {
      if (at < kBlobHeaderSize) out[at++] = std::byte(c);
    }
    ++at;
  }
  for (size_t i = 0; i < raw.metadata.size(); ++i) {
    out[kBlobHeaderSize + i] = std::byte(raw.metadata[i]);
  }
  for (size_t i = 0; i < raw.payload.size(); ++i) out[payload_at + i] = std::byte(raw.payload[i]);
  return out;
}

// A blob around arbitrary metadata JSON text; `aliased_io` is required when the text
// is a JSON object with a non-empty "aliases" array, as the writer would do.
inline std::vector<std::byte> blob_with_metadata(const std::string& text) {
  RawBlob raw;
  raw.metadata = text;
  const auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("aliases") && parsed["aliases"].is_array() &&
      !parsed["aliases"].empty()) {
    raw.features = {std::string(kFeatureAliasedIo)};
  }
  return build_raw(raw);
}

}  // namespace kvrt::format::testing
