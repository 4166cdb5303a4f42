// The blob's header, versioning and required features (A1), round trip and binding
// order (A2, A3), and the seed corpus of the fuzzer (A4).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kvrt/format/blob.h"
#include "kvrt/format/test/blob_test_util.h"

namespace kvrt::format {
namespace {

using testing::blob_with_metadata;
using testing::build_raw;
using testing::error_of;
using ::testing::HasSubstr;
using testing::put_le;
using testing::RawBlob;
using testing::sample_metadata;
using ::testing::StartsWith;
using testing::to_bytes;

std::vector<std::byte> written(const BlobMetadata& metadata, std::string_view payload = "") {
  auto bytes = write_blob(metadata, to_bytes(payload));
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? std::move(bytes).value() : std::vector<std::byte>{};
}

BlobMetadata plain_metadata() {
  BlobMetadata metadata = sample_metadata();
  metadata.aliases.clear();
  return metadata;
}

std::string sample_text() {
  return metadata_to_json(sample_metadata()).dump();
}

// ---- round trip and layout -------------------------------------------------------

TEST(BlobRoundTrip, EveryFieldRoundTrips_A2) {
  const BlobMetadata metadata = sample_metadata();
  const auto bytes = written(metadata, "engine payload");
  auto blob = read_blob(bytes);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->version_major, kBlobVersionMajor);
  EXPECT_EQ(blob->version_minor, kBlobVersionMinor);
  EXPECT_EQ(blob->required_features, std::vector<std::string>{"aliased_io"});
  EXPECT_EQ(blob->metadata, metadata);
  EXPECT_EQ(blob->metadata.target_device, "cuda");
  EXPECT_EQ(blob->metadata.producer["tool"], "kvrt test");
  ASSERT_EQ(blob->payload.size(), 14u);
  EXPECT_EQ(std::memcmp(blob->payload.data(), "engine payload", 14), 0);
  EXPECT_GE(blob->payload.data(), bytes.data());  // a view, not a copy
  EXPECT_EQ(blob->payload.data() + blob->payload.size(), bytes.data() + bytes.size());
}

TEST(BlobRoundTrip, UserAliasOnDynamicShapeRoundTrips_A2) {
  BlobMetadata metadata;
  metadata.inputs = {{"state", DType::kBF16, {graph::Dim::dynamic("B", 1, 8)}}};
  metadata.outputs = {{"state.next", DType::kBF16, {graph::Dim::dynamic("B", 1, 8)}}};
  metadata.aliases = {{"state.next", "state", AliasKind::kUser}};
  auto blob = read_blob(written(metadata));
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata, metadata);
  EXPECT_EQ(blob->metadata.aliases[0].kind, AliasKind::kUser);
}

TEST(BlobRoundTrip, StaticDimIsStoredAsItsSize) {
  BlobMetadata metadata = plain_metadata();
  metadata.outputs[0].shape = {graph::Dim{4, "", 0, 0}};  // bounds of a static dim unused
  auto blob = read_blob(written(metadata));
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata.outputs[0].shape[0], graph::Dim::fixed(4));
}

TEST(BlobLayout, WrittenHeaderMatchesTheDocumentedTable_A1) {
  const auto bytes = written(sample_metadata(), "xyz");
  ASSERT_GE(bytes.size(), kBlobHeaderSize);
  auto u64 = [&](size_t at) {
    uint64_t value = 0;
    for (size_t i = 0; i < 8; ++i) value |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
    return value;
  };
  EXPECT_EQ(std::memcmp(bytes.data(), "KVRTBLOB", 8), 0);
  EXPECT_EQ(u64(8) & 0xffffu, 1u);          // version_major
  EXPECT_EQ((u64(8) >> 16) & 0xffffu, 0u);  // version_minor
  EXPECT_EQ((u64(8) >> 32) & 0xffffffffu, kBlobHeaderSize);
  EXPECT_EQ(u64(16), kBlobHeaderSize);  // metadata right after the header
  EXPECT_EQ(u64(32) % kBlobPayloadAlignment, 0u);
  EXPECT_EQ(u64(32) + u64(40), bytes.size());  // payload ends the blob
  EXPECT_EQ(std::memcmp(bytes.data() + 48, "aliased_io\0\0", 12), 0);
}

TEST(BlobLayout, EmptyPayloadIsAlignedAndReadable) {
  const auto bytes = written(plain_metadata());
  EXPECT_EQ(bytes.size() % kBlobPayloadAlignment, 0u);
  auto blob = read_blob(bytes);
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_TRUE(blob->payload.empty());
}

// ---- binding order (A3) ------------------------------------------------------------

TEST(BlobBindingOrder, BindingsKeepDelegateArgumentOrder_A3) {
  BlobMetadata metadata;
  for (const char* name : {"z_cache", "a_tokens", "m_position"}) {
    metadata.inputs.push_back({name, DType::kI32, {graph::Dim::fixed(1)}});
  }
  for (const char* name : {"y_logits", "b_hidden", "k_out"}) {
    metadata.outputs.push_back({name, DType::kF32, {graph::Dim::fixed(1)}});
  }
  auto blob = read_blob(written(metadata));
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->metadata.inputs, metadata.inputs);
  EXPECT_EQ(blob->metadata.outputs, metadata.outputs);
  EXPECT_EQ(find_input(blob->metadata, "m_position"), 2);
  EXPECT_EQ(find_output(blob->metadata, "y_logits"), 0);
  EXPECT_EQ(find_output(blob->metadata, "a_tokens"), -1);  // an input, not an output
  EXPECT_EQ(find_input(blob->metadata, "missing"), -1);
}

// ---- required features (A1) --------------------------------------------------------

TEST(BlobFeatures, WriterRequiresAliasedIoExactlyWhenAliasesExist_A1) {
  auto aliased = read_blob(written(sample_metadata()));
  ASSERT_TRUE(aliased.ok()) << aliased.status().to_string();
  EXPECT_EQ(aliased->required_features, std::vector<std::string>{"aliased_io"});
  auto plain = read_blob(written(plain_metadata()));
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_TRUE(plain->required_features.empty());
}

TEST(BlobFeatures, UnknownRequiredFeatureIsRefused_A1) {
  RawBlob raw;
  raw.features = {"aliased_io", "paged_kv"};
  raw.metadata = sample_text();
  EXPECT_EQ(error_of(read_blob(build_raw(raw))),
            "InvalidProgram: blob requires feature 'paged_kv' which this reader does not "
            "implement");
}

TEST(BlobFeatures, FeaturesAreCheckedBeforeAnythingElse_A1) {
  RawBlob raw;
  raw.features = {"paged_kv"};
  raw.metadata = "this is not JSON";
  raw.header_size = 7;
  raw.metadata_offset = UINT64_MAX;
  raw.payload_offset = 3;
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("blob requires feature 'paged_kv' which this reader does not implement"));
}

TEST(BlobFeatures, AliasUnawareReaderRefusesAliasedBlob_A1) {
  const auto bytes = written(sample_metadata());
  const std::vector<std::string_view> old_reader;  // knows no features at all
  EXPECT_EQ(error_of(read_blob_with_features(bytes, old_reader)),
            "InvalidProgram: blob requires feature 'aliased_io' which this reader does not "
            "implement");
}

TEST(BlobFeatures, AliasUnawareReaderStillReadsPlainBlob_A1) {
  const std::vector<std::string_view> old_reader;
  auto blob = read_blob_with_features(written(plain_metadata()), old_reader);
  EXPECT_TRUE(blob.ok()) << blob.status().to_string();
}

TEST(BlobFeatures, AliasesWithoutAliasedIoAreRefused_A1) {
  RawBlob raw;
  raw.metadata = sample_text();  // two aliases, no features
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("metadata.aliases: the blob has 2 aliases but does not require "
                        "feature 'aliased_io'"));
}

TEST(BlobFeatures, AliasedIoWithoutAliasesIsRefused_A1) {
  RawBlob raw;
  raw.features = {"aliased_io"};
  raw.metadata = metadata_to_json(plain_metadata()).dump();
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("'aliased_io' is required but metadata.aliases is empty"));
}

TEST(BlobFeatures, MalformedFeatureRegionIsRefused_A1) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"Paged_KV"}, "malformed feature name 'Paged_KV' at byte 48"},
      {{std::string(32, 'a')}, "malformed feature name"},
      {{"aliased_io", "aliased_io"}, "duplicate feature 'aliased_io'"},
      {{"aliased_io", "", "x"}, "non-zero byte at 60 after the end of the list"},
      {{std::string(80, 'a')}, "name at byte 48 is not NUL-terminated"},
      {{"caf\xc3\xa9"}, "malformed feature name 'caf\\xc3\\xa9'"},
  };
  for (const auto& [features, expected] : cases) {
    RawBlob raw;
    raw.features = features;
    raw.metadata = sample_text();
    EXPECT_THAT(error_of(read_blob(build_raw(raw))),
                HasSubstr("header.required_features: " + expected));
  }
}

// ---- version skew (A1) -------------------------------------------------------------

TEST(BlobVersion, NewerMajorVersionIsRefused_A1) {
  RawBlob raw;
  raw.major = 2;
  raw.minor = 3;
  raw.features = {"aliased_io"};
  raw.metadata = sample_text();
  EXPECT_EQ(error_of(read_blob(build_raw(raw))),
            "InvalidProgram: blob format version 2.3 is newer than this reader (1.0); "
            "refusing it");
}

TEST(BlobVersion, OlderMajorVersionIsRefused_A1) {
  RawBlob raw;
  raw.major = 0;
  raw.features = {"aliased_io"};
  raw.metadata = sample_text();
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("blob format version 0.0 is not supported by this reader"));
}

TEST(BlobVersion, NewerMinorIsReadAndItsNewKeysIgnored_A1) {
  nlohmann::json metadata = metadata_to_json(sample_metadata());
  metadata["added_in_1_1"] = {1, 2};
  metadata["inputs"][0]["layout"] = "row_major";
  RawBlob raw;
  raw.minor = 1;
  raw.features = {"aliased_io"};
  raw.metadata = metadata.dump();
  auto blob = read_blob(build_raw(raw));
  ASSERT_TRUE(blob.ok()) << blob.status().to_string();
  EXPECT_EQ(blob->version_minor, 1);
  EXPECT_EQ(blob->metadata, sample_metadata());
}

TEST(BlobVersion, UnknownKeyInCurrentMinorIsRefused_A2) {
  nlohmann::json metadata = metadata_to_json(sample_metadata());
  metadata["aliases"][1].erase("kind");
  metadata["aliases"][1]["knid"] = "user";  // a typo must not silently become the default
  EXPECT_THAT(error_of(read_blob(blob_with_metadata(metadata.dump()))),
              HasSubstr("metadata.aliases[1]: unknown key 'knid'"));
}

// ---- magic, truncation, offsets (A2) ----------------------------------------------

TEST(BlobHeader, UnknownMagicIsRefused_A2) {
  RawBlob raw;
  raw.magic = "KVRTPROG";
  raw.metadata = sample_text();
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("unknown magic 'KVRTPROG': not a kvrt delegate blob"));
  EXPECT_THAT(error_of(read_blob(to_bytes(std::string_view("\x7f"
                                                           "ELF\x02\x01\x01\x00",
                                                           8)))),
              HasSubstr("unknown magic '\\x7fELF\\x02\\x01\\x01\\x00'"));
}

TEST(BlobHeader, EveryTruncationIsRefused_A2) {
  const auto bytes = written(sample_metadata(), "payload bytes");
  for (size_t size = 0; size < bytes.size(); ++size) {
    auto blob = read_blob(std::span<const std::byte>(bytes.data(), size));
    ASSERT_FALSE(blob.ok()) << "prefix of " << size << " bytes was accepted";
    EXPECT_EQ(blob.status().code(), ErrorCode::kInvalidProgram);
  }
  EXPECT_EQ(error_of(read_blob(std::span<const std::byte>(bytes.data(), 40))),
            "InvalidProgram: truncated blob: 40 bytes, shorter than the 128-byte header");
  EXPECT_THAT(error_of(read_blob({})), HasSubstr("truncated blob: 0 bytes"));
}

TEST(BlobHeader, HeaderSizeOutsideTheBlobIsRefused_A2) {
  for (uint32_t header_size : {0u, 64u, 127u, 1u << 30}) {
    RawBlob raw;
    raw.header_size = header_size;
    raw.metadata = metadata_to_json(plain_metadata()).dump();
    EXPECT_THAT(error_of(read_blob(build_raw(raw))), HasSubstr("header.header_size: "));
  }
}

TEST(BlobHeader, OverflowingOffsetsAndSizesAreRefused_A2) {
  const std::string text = metadata_to_json(plain_metadata()).dump();
  RawBlob raw;
  raw.metadata = text;
  raw.metadata_offset = UINT64_MAX - 4;
  raw.metadata_size = 16;  // offset + size wraps around to 11
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("header.metadata_offset/metadata_size: metadata at offset "
                        "18446744073709551611 with size 16 lies outside the"));
  raw = RawBlob{};
  raw.metadata = text;
  raw.payload = "abc";
  raw.payload_size = UINT64_MAX;
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("header.payload_offset/payload_size: payload at offset"));
  raw.payload_size = std::nullopt;
  raw.payload_offset = uint64_t{1} << 63;
  EXPECT_THAT(error_of(read_blob(build_raw(raw))), HasSubstr("lies outside the"));
}

TEST(BlobHeader, MetadataOutsideTheBlobIsRefused_A2) {
  RawBlob raw;
  raw.metadata = sample_text();
  raw.metadata_size = 1 << 20;
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("header.metadata_offset/metadata_size"));
}

TEST(BlobHeader, MetadataOverlappingTheHeaderIsRefused_A2) {
  RawBlob raw;
  raw.metadata = sample_text();
  raw.features = {"aliased_io"};
  raw.metadata_offset = 64;
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("header.metadata_offset: 64 overlaps the header (header_size 128)"));
}

TEST(BlobHeader, EmptyMetadataIsRefused_A2) {
  RawBlob raw;
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("header.metadata_size: metadata is empty"));
}

TEST(BlobHeader, MisalignedPayloadIsRefused_A2) {
  RawBlob raw;
  raw.metadata = metadata_to_json(plain_metadata()).dump();
  raw.payload = std::string(64, 'p');
  auto bytes = build_raw(raw);
  const uint64_t aligned = bytes.size() - 64;
  put_le(bytes, 32, 8, aligned + 8);
  put_le(bytes, 40, 8, 56);
  EXPECT_THAT(error_of(read_blob(bytes)),
              HasSubstr("header.payload_offset: " + std::to_string(aligned + 8) +
                        " is not a multiple of 64"));
}

TEST(BlobHeader, PayloadOverlappingMetadataIsRefused_A2) {
  RawBlob raw;
  raw.metadata = metadata_to_json(plain_metadata()).dump();
  auto bytes = build_raw(raw);
  put_le(bytes, 32, 8, kBlobHeaderSize);
  put_le(bytes, 40, 8, bytes.size() - kBlobHeaderSize);
  EXPECT_THAT(error_of(read_blob(bytes)), HasSubstr("overlaps the metadata, which ends at"));
}

TEST(BlobHeader, TrailingBytesAreRefused_A2) {
  RawBlob raw;
  raw.metadata = metadata_to_json(plain_metadata()).dump();
  raw.trailing = 3;
  EXPECT_THAT(error_of(read_blob(build_raw(raw))),
              HasSubstr("blob has 3 trailing bytes after the payload"));
}

// ---- fuzz seed corpus (A4) ---------------------------------------------------------

TEST(BlobFuzzCorpus, SeedCorpusIsReadWithoutCrashing_A4) {
  const std::filesystem::path dir = std::filesystem::path(KVRT_SOURCE_DIR) / "fuzz/corpus/blob";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const auto bytes = to_bytes(text);
    auto blob = read_blob(bytes);
    if (entry.path().filename().string().starts_with("valid_")) {
      EXPECT_TRUE(blob.ok()) << entry.path() << ": " << blob.status().to_string();
    } else {
      EXPECT_THAT(error_of(blob), StartsWith("InvalidProgram: ")) << entry.path();
    }
    ++files;
  }
  EXPECT_GE(files, 8);
}

}  // namespace
}  // namespace kvrt::format
