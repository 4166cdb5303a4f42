#include "kvrt/jinja/chat_template.h"

#include <fstream>
#include <sstream>

namespace kvrt::jinja {
namespace {

namespace fs = std::filesystem;

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read '", path.string(), "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<Json> read_json(const fs::path& path) {
  KVRT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return invalid_argument("'", path.string(), "' is not valid JSON");
  return json;
}

// A special token in tokenizer_config.json: "<s>" or {"__type": "AddedToken", "content": "<s>"}.
std::optional<std::string> special_token(const Json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const Json& token = config[key];
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string()) {
    return token["content"].get<std::string>();
  }
  return std::nullopt;
}

Result<std::string> template_from_config(const Json& config, const fs::path& path) {
  if (!config.contains("chat_template") || config["chat_template"].is_null()) {
    return not_found("'", path.string(),
                     "' has no chat_template (and no chat_template.jinja is beside it)");
  }
  const Json& value = config["chat_template"];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string names;
    for (const Json& entry : value) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
      if (entry["name"] == "default" && entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
      names += (names.empty() ? "" : ", ") + entry["name"].dump();
    }
    return not_found("'", path.string(), "' has chat templates [", names,
                     "] but none named \"default\"");
  }
  return invalid_argument("'", path.string(), "': chat_template must be a string or a list");
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_source(const std::string& source) {
  KVRT_ASSIGN_OR_RETURN(Template tmpl, Template::parse(source));
  return ChatTemplate(source, std::move(tmpl));
}

Result<ChatTemplate> ChatTemplate::load(const fs::path& path) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  if (!is_dir && !fs::exists(path, ec)) return not_found("'", path.string(), "' does not exist");
  const fs::path dir = is_dir ? path : path.parent_path();
  const bool is_config = !is_dir && path.extension() == ".json";
  const fs::path config_path = is_config ? path : dir / "tokenizer_config.json";
  std::optional<Json> config;
  if (fs::exists(config_path, ec)) {
    KVRT_ASSIGN_OR_RETURN(Json json, read_json(config_path));
    if (!json.is_object())
      return invalid_argument("'", config_path.string(), "' is not a JSON object");
    config = std::move(json);
  }
  std::string source;
  const fs::path jinja_path = dir / "chat_template.jinja";
  if (!is_dir && !is_config) {
    KVRT_ASSIGN_OR_RETURN(source, read_file(path));
  } else if (fs::exists(jinja_path, ec)) {
    KVRT_ASSIGN_OR_RETURN(source, read_file(jinja_path));
  } else if (config) {
    KVRT_ASSIGN_OR_RETURN(source, template_from_config(*config, config_path));
  } else {
    return not_found("no chat template in '", path.string(),
                     "' (looked for chat_template.jinja and tokenizer_config.json)");
  }
  Result<ChatTemplate> loaded = from_source(source);
  if (!loaded.ok()) return loaded.status().with_context("chat template of '" + path.string() + "'");
  if (config) {
    loaded->bos_token_ = special_token(*config, "bos_token");
    loaded->eos_token_ = special_token(*config, "eos_token");
  }
  return loaded;
}

Result<std::string> ChatTemplate::render(const Json& messages, const Json& tools,
                                         bool add_generation_prompt, const Json& extra) const {
  if (!messages.is_array()) return invalid_argument("messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array())
    return invalid_argument("tools must be null or an array");
  if (!extra.is_object()) return invalid_argument("extra variables must be a JSON object");
  Json context = Json::object();
  if (bos_token_) context["bos_token"] = *bos_token_;
  if (eos_token_) context["eos_token"] = *eos_token_;
  for (const auto& [name, value] : extra.items()) context[name] = value;
  context["messages"] = messages;
  context["tools"] = tools;
  context["add_generation_prompt"] = add_generation_prompt;
  return template_.render(context);
}

}  // namespace kvrt::jinja
