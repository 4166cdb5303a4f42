// Helpers for the frontend tests: temporary directories, raw file writing, and tiny
// checkpoints written with write_safetensors.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kvrt/frontend/llama_weights.h"
#include "kvrt/frontend/safetensors_writer.h"

namespace kvrt::frontend::testing {

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "kvrt_frontend_";
    if (info != nullptr) name += std::string(info->test_suite_name()) + "_" + info->name();
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// 8-byte little-endian length + header text + data, exactly as given (for malformed files).
inline std::string raw_safetensors(const std::string& header, const std::string& data = "",
                                   uint64_t declared_length = UINT64_MAX) {
  const uint64_t length = declared_length == UINT64_MAX ? header.size() : declared_length;
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  return out + header + data;
}

inline std::span<const std::byte> as_bytes(const std::vector<float>& values) {
  return std::as_bytes(std::span<const float>(values));
}

// Random tensors of the given dtype for every name/shape; written in one file or split
// round-robin into `shards` files with a model.safetensors.index.json.
inline Status write_random_weights(const std::string& dir, const std::vector<ExpectedTensor>& specs,
                                   DType dtype, int shards = 1, uint32_t seed = 7) {
  std::vector<std::vector<TensorToWrite>> files(static_cast<size_t>(shards));
  for (size_t i = 0; i < specs.size(); ++i) {
    files[i % static_cast<size_t>(shards)].push_back({specs[i].name, dtype, specs[i].shape, {}});
  }
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  TensorFill fill = [&](size_t, std::span<std::byte> out) -> Status {
    const size_t count = out.size() / dtype_size(dtype);
    for (size_t k = 0; k < count; ++k) {
      const float value = normal(rng);
      if (dtype == DType::kF32) {
        std::memcpy(out.data() + 4 * k, &value, 4);
      } else {
        const uint16_t half = dtype == DType::kF16 ? f32_to_f16(value) : f32_to_bf16(value);
        std::memcpy(out.data() + 2 * k, &half, 2);
      }
    }
    return Status();
  };
  if (shards == 1) {
    return write_safetensors(dir + "/model.safetensors", files[0], fill);
  }
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, shards);
    KVRT_RETURN_IF_ERROR(write_safetensors(dir + "/" + name, files[static_cast<size_t>(s)], fill));
    for (const TensorToWrite& t : files[static_cast<size_t>(s)]) index["weight_map"][t.name] = name;
  }
  write_file(dir + "/model.safetensors.index.json", index.dump(2));
  return Status();
}

// A small Llama config (2 layers, GQA 4/2 heads, head_dim 16) as config.json text.
inline nlohmann::json tiny_llama_config_json() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 256},
          {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "float32"}};
}

}  // namespace kvrt::frontend::testing
