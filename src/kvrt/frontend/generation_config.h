// Defaults for generation from generation_config.json (and the token ids of
// config.json when that file is absent). These are policy, not model math: unknown
// fields are ignored, but the fields read here are type-checked.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt::frontend {

struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // eos_token_id may be one id or a list
  std::optional<int64_t> pad_token_id;
  std::optional<int64_t> max_length;  // prompt + new tokens
  std::optional<int64_t> max_new_tokens;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> repetition_penalty;
};

// Errors (InvalidArgument) name `source` and the field.
Result<GenerationConfig> parse_generation_config(const nlohmann::json& json,
                                                 const std::string& source);
Result<GenerationConfig> load_generation_config(const std::string& path);

// The fields that are set, under generation_config.json's names (eos_token_id always
// a list): what parse_generation_config reads back. A program file records it, so
// that it carries its model's generation defaults wherever it goes.
nlohmann::json to_json(const GenerationConfig& config);

}  // namespace kvrt::frontend
