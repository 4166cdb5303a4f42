// libFuzzer target for config.json and generation_config.json: a config either parses
// into a model config that refuses nothing it accepted (shapes that build a graph's
// arithmetic without overflow), or is refused with a one-line message naming the file.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "kvrt/frontend/generation_config.h"
#include "kvrt/frontend/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvrt;
  const auto json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  auto config = frontend::parse_model_config(json, "config.json");
  if (!config.ok()) {
    fuzz::check_refusal(config.status());
    if (config.status().message().find("config.json") == std::string::npos) __builtin_trap();
  } else if (config->vocab_size <= 0 || config->hidden_size <= 0 ||
             config->num_hidden_layers <= 0 || config->head_dim <= 0) {
    __builtin_trap();  // accepted shapes are positive
  }
  auto generation = frontend::parse_generation_config(json, "generation_config.json");
  if (!generation.ok()) fuzz::check_refusal(generation.status());
  return 0;
}
