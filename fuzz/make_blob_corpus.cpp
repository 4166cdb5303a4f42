// Writes the blob fuzzer's seed corpus: valid blobs from the real writer (valid_*)
// and a few hand-built edge cases the reader must refuse (edge_*). The files are
// committed in fuzz/corpus/blob; rerun after a format change:
//   kvrt_make_blob_corpus fuzz/corpus/blob
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kvrt/format/blob.h"
#include "kvrt/format/test/blob_test_util.h"

namespace {

using namespace kvrt;
using namespace kvrt::format;
using testing::blob_with_metadata;
using testing::build_raw;
using testing::RawBlob;
using testing::sample_metadata;
using testing::to_bytes;

bool save(const std::string& dir, const std::string& name, const std::vector<std::byte>& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

std::vector<std::byte> must_write(const BlobMetadata& metadata, std::string_view payload) {
  auto bytes = write_blob(metadata, to_bytes(payload));
  if (!bytes.ok()) {
    std::fprintf(stderr, "write_blob: %s\n", bytes.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(bytes).value();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, std::vector<std::byte>>> files;

  files.emplace_back("valid_step.blob", must_write(sample_metadata(), "engine payload"));

  BlobMetadata plain = sample_metadata();
  plain.aliases.clear();
  plain.target_device = "cpu";
  files.emplace_back("valid_plain.blob", must_write(plain, ""));

  BlobMetadata names;
  names.inputs = {{"k\"cache\\0", DType::kBF16, {graph::Dim::dynamic("S", 1, 64)}},
                  {"缓存", DType::kI64, {}}};
  names.outputs = {{"ключ_0", DType::kBF16, {graph::Dim::dynamic("S", 1, 64)}},
                   {"flags", DType::kBool, {graph::Dim::fixed(0)}}};
  names.aliases = {{"ключ_0", "k\"cache\\0", AliasKind::kUser}};
  names.producer = {{"tool", "seed"}, {"scale", 0.5}, {"list", {1, -2, nullptr, true}}};
  files.emplace_back("valid_names_user_alias.blob", must_write(names, "\x01\x02"));

  nlohmann::json no_kind = metadata_to_json(sample_metadata());
  no_kind["aliases"][0].erase("kind");
  no_kind.erase("target_device");
  no_kind.erase("producer");
  files.emplace_back("valid_missing_kind.blob", blob_with_metadata(no_kind.dump()));

  RawBlob minor;
  minor.minor = 7;
  minor.features = {"aliased_io"};
  nlohmann::json extra = metadata_to_json(sample_metadata());
  extra["future"] = {{"a", 1}};
  minor.metadata = extra.dump();
  files.emplace_back("valid_newer_minor.blob", build_raw(minor));

  RawBlob feature;
  feature.features = {"aliased_io", "paged_kv"};
  feature.metadata = metadata_to_json(sample_metadata()).dump();
  files.emplace_back("edge_unknown_feature.blob", build_raw(feature));

  RawBlob major = feature;
  major.features = {"aliased_io"};
  major.major = 2;
  files.emplace_back("edge_newer_major.blob", build_raw(major));

  auto truncated = files[0].second;
  truncated.resize(100);
  files.emplace_back("edge_truncated.blob", truncated);

  RawBlob misaligned;
  misaligned.metadata = metadata_to_json(plain).dump();
  misaligned.payload = std::string(64, 'p');
  auto misaligned_bytes = build_raw(misaligned);
  testing::put_le(misaligned_bytes, 32, 8, misaligned_bytes.size() - 56);
  testing::put_le(misaligned_bytes, 40, 8, 56);
  files.emplace_back("edge_misaligned_payload.blob", misaligned_bytes);

  RawBlob overflow;
  overflow.metadata = metadata_to_json(plain).dump();
  overflow.metadata_offset = UINT64_MAX - 4;
  overflow.metadata_size = 16;
  files.emplace_back("edge_overflow_offsets.blob", build_raw(overflow));

  nlohmann::json twice = metadata_to_json(sample_metadata());
  twice["aliases"][1]["input"] = "k_cache.0";
  files.emplace_back("edge_input_aliased_twice.blob", blob_with_metadata(twice.dump()));

  std::string duplicate = metadata_to_json(plain).dump();
  duplicate.insert(1, R"("outputs":[],)");
  files.emplace_back("edge_duplicate_key.blob", blob_with_metadata(duplicate));

  for (const auto& [name, bytes] : files) {
    if (!save(dir, name, bytes)) {
      std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
      return 1;
    }
  }
  std::printf("wrote %zu files to %s\n", files.size(), dir.c_str());
  return 0;
}
