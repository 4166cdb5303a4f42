// Writes a random-weight Llama checkpoint (config.json + safetensors, optionally
// sharded) for export benchmarks and tests. Defaults to the TinyLlama 1.1B shape:
//   kvrt_make_random_checkpoint /tmp/tinyllama-random [--layers 22] [--shards 2]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvrt/frontend/llama_weights.h"
#include "kvrt/frontend/model_config.h"
#include "kvrt/frontend/safetensors_writer.h"

namespace {

using kvrt::DType;

// xorshift64*: fast and deterministic; values uniform in [-0.05, 0.05].
struct Random {
  uint64_t state;
  float next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const uint64_t bits = state * 2685821657736338717ull;
    return (static_cast<float>(bits >> 40) / static_cast<float>(1u << 24) - 0.5f) * 0.1f;
  }
};

kvrt::Status fill(std::span<std::byte> out, DType dtype, uint64_t seed) {
  Random random{seed * 0x9e3779b97f4a7c15ull + 1};
  const size_t width = kvrt::dtype_size(dtype);
  for (size_t i = 0; i < out.size() / width; ++i) {
    const float value = random.next();
    if (dtype == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &value, 4);
    } else {
      const uint16_t bits =
          dtype == DType::kBF16 ? kvrt::f32_to_bf16(value) : kvrt::f32_to_f16(value);
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
  }
  return kvrt::Status();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a random-weight Llama checkpoint"};
  std::string dir, dtype_text = "bf16";
  int64_t layers = 22, hidden = 2048, intermediate = 5632, heads = 32, kv_heads = 4, vocab = 32000,
          max_positions = 2048;
  int shards = 1;
  app.add_option("dir", dir, "output directory")->required();
  app.add_option("--layers", layers);
  app.add_option("--hidden", hidden);
  app.add_option("--intermediate", intermediate);
  app.add_option("--heads", heads);
  app.add_option("--kv-heads", kv_heads);
  app.add_option("--vocab", vocab);
  app.add_option("--max-positions", max_positions);
  app.add_option("--dtype", dtype_text, "f32, f16 or bf16");
  app.add_option("--shards", shards)->check(CLI::Range(1, 99));
  CLI11_PARSE(app, argc, argv);

  auto dtype = kvrt::parse_dtype(dtype_text);
  if (!dtype.ok() || !kvrt::is_floating(*dtype)) {
    std::fprintf(stderr, "error: --dtype must be f32, f16 or bf16\n");
    return 1;
  }
  const char* torch_dtype = *dtype == DType::kF32   ? "float32"
                            : *dtype == DType::kF16 ? "float16"
                                                    : "bfloat16";
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"hidden_size", hidden},
                                 {"intermediate_size", intermediate},
                                 {"num_hidden_layers", layers},
                                 {"num_attention_heads", heads},
                                 {"num_key_value_heads", kv_heads},
                                 {"vocab_size", vocab},
                                 {"max_position_embeddings", max_positions},
                                 {"rms_norm_eps", 1e-5},
                                 {"rope_theta", 10000.0},
                                 {"hidden_act", "silu"},
                                 {"tie_word_embeddings", false},
                                 {"torch_dtype", torch_dtype},
                                 {"bos_token_id", 1},
                                 {"eos_token_id", 2}};
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump(2) << "\n";
  auto parsed = kvrt::frontend::parse_model_config(config, "config.json");
  if (!parsed.ok()) {
    std::fprintf(stderr, "error: %s\n", parsed.status().to_string().c_str());
    return 1;
  }
  std::vector<kvrt::frontend::TensorToWrite> tensors;
  for (const auto& expected : kvrt::frontend::expected_llama_tensors(*parsed)) {
    tensors.push_back({expected.name, *dtype, expected.shape, {}});
  }
  nlohmann::json weight_map = nlohmann::json::object();
  const size_t per_shard = (tensors.size() + static_cast<size_t>(shards) - 1) / shards;
  for (int s = 0; s < shards; ++s) {
    const size_t begin = std::min(tensors.size(), static_cast<size_t>(s) * per_shard);
    const size_t end = std::min(tensors.size(), begin + per_shard);
    char name[64];
    if (shards == 1) {
      std::snprintf(name, sizeof(name), "model.safetensors");
    } else {
      std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, shards);
    }
    std::span<const kvrt::frontend::TensorToWrite> part(tensors.data() + begin, end - begin);
    for (const auto& tensor : part) weight_map[tensor.name] = name;
    kvrt::Status status = kvrt::frontend::write_safetensors(
        dir + "/" + name, part,
        [&](size_t index, std::span<std::byte> out) { return fill(out, *dtype, begin + index); });
    if (!status.ok()) {
      std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
      return 1;
    }
  }
  if (shards > 1) {
    std::ofstream(dir + "/model.safetensors.index.json")
        << nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", weight_map}}.dump(
               2);
  }
  std::printf("wrote %zu tensors to %s\n", tensors.size(), dir.c_str());
  return 0;
}
