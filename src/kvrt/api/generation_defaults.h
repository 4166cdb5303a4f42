// The generation settings a checkpoint asks for in generation_config.json, resolved as
// Hugging Face's model.generate() resolves them: every field the file leaves out takes
// GenerationConfig's default (do_sample false, temperature 1, top_k 50, top_p 1,
// repetition_penalty 1), and do_sample false means greedy whatever the temperature.
// Settings the user gives win over the file, field by field; giving a sampling setting
// (temperature > 0, top-k, top-p or min-p) asks for sampling.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/frontend/generation_config.h"
#include "kvrt/generation/sampler.h"

namespace kvrt {

struct GenerationDefaults {
  bool do_sample = false;
  float temperature = 1.0f;
  int32_t top_k = 50;
  float top_p = 1.0f;
  float repetition_penalty = 1.0f;
  // eos_token_id, one id or a list: each one stops generation.
  std::vector<int32_t> eos_ids;
  std::optional<int64_t> max_new_tokens;
};

// What the user set explicitly; nullopt leaves the field to the model's defaults.
struct SamplingOverrides {
  std::optional<float> temperature;
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
};

// HF's defaults completed by the fields config sets. InvalidArgument names `source`
// and the field for an id or count out of int32 range.
Result<GenerationDefaults> generation_defaults(const frontend::GenerationConfig& config,
                                               const std::string& source);

// The defaults of a checkpoint directory: from its generation_config.json, or HF's
// defaults when it has none. Errors name the file.
Result<GenerationDefaults> read_generation_defaults(const std::string& checkpoint_dir);

// The sampling parameters generate() uses: overrides first, then the defaults; greedy
// (temperature 0) unless sampling was asked for by the user or by do_sample.
SamplingParams resolve_sampling(const GenerationDefaults& defaults,
                                const SamplingOverrides& overrides, uint64_t seed);

}  // namespace kvrt
