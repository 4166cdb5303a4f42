#include "kvrt/frontend/generation_config.h"

#include "kvrt/frontend/json_fields.h"

namespace kvrt::frontend {

Result<GenerationConfig> parse_generation_config(const nlohmann::json& json,
                                                 const std::string& source) {
  if (!json.is_object()) return invalid_argument(source, ": expected a JSON object");
  JsonFields fields(json, source);
  GenerationConfig config;
  KVRT_ASSIGN_OR_RETURN(config.bos_token_id, fields.optional_int("bos_token_id"));
  KVRT_ASSIGN_OR_RETURN(config.eos_token_ids, fields.token_ids("eos_token_id"));
  KVRT_ASSIGN_OR_RETURN(config.pad_token_id, fields.optional_int("pad_token_id"));
  KVRT_ASSIGN_OR_RETURN(config.max_length, fields.optional_int("max_length"));
  KVRT_ASSIGN_OR_RETURN(config.max_new_tokens, fields.optional_int("max_new_tokens"));
  KVRT_ASSIGN_OR_RETURN(config.do_sample, fields.optional_bool("do_sample"));
  KVRT_ASSIGN_OR_RETURN(config.temperature, fields.optional_number("temperature"));
  KVRT_ASSIGN_OR_RETURN(config.top_k, fields.optional_int("top_k"));
  KVRT_ASSIGN_OR_RETURN(config.top_p, fields.optional_number("top_p"));
  KVRT_ASSIGN_OR_RETURN(config.repetition_penalty, fields.optional_number("repetition_penalty"));
  for (const char* key : {"bos_token_id", "pad_token_id"}) {
    KVRT_ASSIGN_OR_RETURN(auto id, fields.optional_int(key));
    if (id && *id < 0) return fields.error(key, "must not be negative");
  }
  for (const char* key : {"max_length", "max_new_tokens", "top_k"}) {
    KVRT_ASSIGN_OR_RETURN(auto count, fields.optional_int(key));
    if (count && *count < 0) return fields.error(key, "must not be negative");
  }
  return config;
}

nlohmann::json to_json(const GenerationConfig& config) {
  nlohmann::json json = nlohmann::json::object();
  auto put = [&json](const char* key, const auto& value) {
    if (value) json[key] = *value;
  };
  put("bos_token_id", config.bos_token_id);
  if (!config.eos_token_ids.empty()) json["eos_token_id"] = config.eos_token_ids;
  put("pad_token_id", config.pad_token_id);
  put("max_length", config.max_length);
  put("max_new_tokens", config.max_new_tokens);
  put("do_sample", config.do_sample);
  put("temperature", config.temperature);
  put("top_k", config.top_k);
  put("top_p", config.top_p);
  put("repetition_penalty", config.repetition_penalty);
  return json;
}

Result<GenerationConfig> load_generation_config(const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(nlohmann::json json, read_json_file(path));
  return parse_generation_config(json, path);
}

}  // namespace kvrt::frontend
