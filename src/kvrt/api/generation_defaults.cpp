#include "kvrt/api/generation_defaults.h"

#include <filesystem>
#include <limits>

namespace kvrt {

Result<GenerationDefaults> generation_defaults(const frontend::GenerationConfig& config,
                                               const std::string& source) {
  GenerationDefaults defaults;
  defaults.do_sample = config.do_sample.value_or(false);
  if (config.temperature) defaults.temperature = static_cast<float>(*config.temperature);
  if (config.top_p) defaults.top_p = static_cast<float>(*config.top_p);
  if (config.repetition_penalty) {
    defaults.repetition_penalty = static_cast<float>(*config.repetition_penalty);
  }
  if (config.top_k) {
    if (*config.top_k > std::numeric_limits<int32_t>::max()) {
      return invalid_argument(source, ": top_k ", *config.top_k, " is out of range");
    }
    defaults.top_k = static_cast<int32_t>(*config.top_k);
  }
  for (int64_t id : config.eos_token_ids) {
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return invalid_argument(source, ": eos_token_id ", id, " is not a token id");
    }
    defaults.eos_ids.push_back(static_cast<int32_t>(id));
  }
  defaults.max_new_tokens = config.max_new_tokens;
  return defaults;
}

Result<GenerationDefaults> read_generation_defaults(const std::string& checkpoint_dir) {
  const std::filesystem::path file =
      std::filesystem::path(checkpoint_dir) / "generation_config.json";
  std::error_code error;
  if (!std::filesystem::exists(file, error)) return GenerationDefaults();
  KVRT_ASSIGN_OR_RETURN(frontend::GenerationConfig config,
                        frontend::load_generation_config(file.string()));
  return generation_defaults(config, file.string());
}

SamplingParams resolve_sampling(const GenerationDefaults& defaults,
                                const SamplingOverrides& overrides, uint64_t seed) {
  SamplingParams params;
  params.seed = seed;
  params.repetition_penalty = overrides.repetition_penalty.value_or(defaults.repetition_penalty);
  params.min_p = overrides.min_p.value_or(0.0f);
  const bool user_samples = (overrides.temperature && *overrides.temperature > 0) ||
                            overrides.top_k || overrides.top_p || overrides.min_p;
  const bool user_greedy = overrides.temperature && *overrides.temperature == 0;
  if (user_greedy || !(user_samples || defaults.do_sample)) {
    params.temperature = 0.0f;  // greedy, as HF when do_sample is false
    return params;
  }
  params.temperature = overrides.temperature.value_or(defaults.temperature);
  params.top_k = overrides.top_k.value_or(defaults.top_k);
  params.top_p = overrides.top_p.value_or(defaults.top_p);
  return params;
}

}  // namespace kvrt
