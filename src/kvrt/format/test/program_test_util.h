// A small hand-built program for program-format tests: one method `decode` with one
// delegate call (tokens, position, k_cache.0 -> k_cache.0.updated, logits) and two
// weights, plus helpers to write it into a temporary directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kvrt/format/blob.h"
#include "kvrt/format/program.h"

namespace kvrt::format::testing {

struct SampleProgram {
  ProgramSpec spec;
  std::vector<std::vector<std::byte>> blobs;
  std::vector<WeightFiller> fillers;
};

inline std::vector<graph::Dim> dims(std::initializer_list<int64_t> sizes) {
  std::vector<graph::Dim> out;
  for (int64_t size : sizes) out.push_back(graph::Dim::fixed(size));
  return out;
}

// Fills each byte i of a weight with (seed + i) mod 251.
inline WeightFiller pattern_filler(int seed) {
  return [seed](std::span<std::byte> out) {
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<std::byte>((static_cast<size_t>(seed) + i) % 251);
    }
    return Status();
  };
}

inline BlobMetadata sample_blob_metadata() {
  BlobMetadata metadata;
  metadata.inputs = {{"tokens", DType::kI32, {graph::Dim::fixed(1), graph::Dim::fixed(1)}},
                     {"position", DType::kI32, dims({1})},
                     {"k_cache.0", DType::kF32, dims({2, 8, 4})}};
  metadata.outputs = {{"k_cache.0.updated", DType::kF32, dims({2, 8, 4})},
                      {"logits", DType::kF32, dims({1, 16})}};
  metadata.aliases = {{"k_cache.0.updated", "k_cache.0", AliasKind::kKvCacheUpdate}};
  return metadata;
}

inline SampleProgram sample_program() {
  SampleProgram program;
  ProgramSpec& spec = program.spec;
  spec.weights = {{"embed.weight", DType::kBF16, {16, 8}, 0, 16 * 8 * 2},
                  {"norm.weight", DType::kF32, {8}, 0, 8 * 4}};
  spec.buffers = {{"k_cache.0", DType::kF32, {2, 8, 4}, Arena::kDevice, {{"decode", 0}}}};
  spec.delegates = {{"engine", "decode", 0, 0}};
  MethodSpec method;
  method.name = "decode";
  Storage input{StorageKind::kInput, Arena::kHost, 0, 0, ""};
  Storage cache{StorageKind::kBuffer, Arena::kHost, 0, 0, "k_cache.0"};
  Storage logits{StorageKind::kPlanned, Arena::kHost, 0, 64, ""};
  method.values = {{"tokens", DType::kI32, dims({1, 1}), input},
                   {"position", DType::kI32, dims({1}), input},
                   {"k_cache.0", DType::kF32, dims({2, 8, 4}), cache},
                   {"k_cache.0.updated", DType::kF32, dims({2, 8, 4}), cache},
                   {"logits", DType::kF32, dims({1, 16}), logits}};
  method.inputs = {0, 1};
  method.outputs = {4};
  DelegateCall call;
  call.delegate = 0;
  call.args = {0, 1, 2, 3, 4};
  call.num_inputs = 3;
  method.instructions.emplace_back(std::move(call));
  method.mutations = {{"k_cache.0", 3}};
  method.host_arena_bytes = 64;
  spec.methods.push_back(std::move(method));
  spec.producer = {{"tool", "program_test"}};
  auto blob = write_blob(sample_blob_metadata(), {});
  EXPECT_TRUE(blob.ok()) << blob.status().to_string();
  program.blobs.push_back(blob.ok() ? *blob : std::vector<std::byte>{});
  program.fillers = {pattern_filler(1), pattern_filler(2)};
  return program;
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kvrt_test_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  const std::string& path() const { return path_; }
  // Names of the entries in the directory.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

 private:
  std::string path_;
};

inline Status write_sample(const SampleProgram& program, const std::string& path) {
  return write_program(path, program.spec, program.blobs, program.fillers);
}

template <typename T>
std::string error_of(const Result<T>& result) {
  return result.ok() ? "ok" : result.status().to_string();
}
inline std::string error_of(const Status& status) {
  return status.ok() ? "ok" : status.to_string();
}

inline std::vector<std::byte> read_file_bytes(const std::string& path) {
  std::vector<std::byte> bytes(std::filesystem::file_size(path));
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file != nullptr) {
    EXPECT_EQ(std::fread(bytes.data(), 1, bytes.size(), file), bytes.size());
    std::fclose(file);
  }
  return bytes;
}

inline uint64_t header_u64(std::span<const std::byte> bytes, size_t at) {
  uint64_t value = 0;
  std::memcpy(&value, bytes.data() + at, sizeof(value));
  return value;
}

inline nlohmann::json metadata_of(std::span<const std::byte> bytes) {
  const char* text = reinterpret_cast<const char*>(bytes.data() + header_u64(bytes, 16));
  return nlohmann::json::parse(text, text + header_u64(bytes, 24));
}

// The same container with its metadata replaced (segments moved, offsets inside the
// segments unchanged): how reader tests build files the writer refuses to write.
inline std::vector<std::byte> with_metadata(std::span<const std::byte> bytes,
                                            const nlohmann::json& metadata) {
  const std::string text = metadata.dump();
  const uint64_t blobs_at = header_u64(bytes, 32), blobs_size = header_u64(bytes, 40);
  const uint64_t weights_at = header_u64(bytes, 48), weights_size = header_u64(bytes, 56);
  const uint64_t new_blobs_at = (64 + text.size() + 63) / 64 * 64;
  const uint64_t new_weights_at = (new_blobs_at + blobs_size + 4095) / 4096 * 4096;
  std::vector<std::byte> out(new_weights_at + weights_size, std::byte{0});
  std::memcpy(out.data(), bytes.data(), 64);
  std::memcpy(out.data() + 64, text.data(), text.size());
  std::memcpy(out.data() + new_blobs_at, bytes.data() + blobs_at, blobs_size);
  std::memcpy(out.data() + new_weights_at, bytes.data() + weights_at, weights_size);
  auto put = [&](size_t at, uint64_t value) { std::memcpy(out.data() + at, &value, 8); };
  put(24, text.size());
  put(32, new_blobs_at);
  put(48, new_weights_at);
  return out;
}

}  // namespace kvrt::format::testing
