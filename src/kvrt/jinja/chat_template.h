// A model's chat template, found where Hugging Face keeps it, and rendered the way
// transformers' apply_chat_template renders it: variables messages, tools (None when
// there are none), add_generation_prompt, bos_token and eos_token, plus extra variables
// (enable_thinking, date_string, ...).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "kvrt/core/result.h"
#include "kvrt/jinja/template.h"

namespace kvrt::jinja {

class ChatTemplate {
 public:
  // `path` is a model directory, its tokenizer_config.json, or a template file
  // (chat_template.jinja or any other name). The template is chat_template.jinja beside
  // tokenizer_config.json when present (as transformers prefers it), else that file's
  // "chat_template": a string, or a list of {"name", "template"} of which "default" is
  // taken. bos_token and eos_token come from tokenizer_config.json (a string, or an
  // AddedToken object with "content") when it is there.
  // Errors: kNotFound when there is no template, kInvalidArgument for unreadable JSON
  // or a malformed template, kNotSupported for templates beyond the supported subset.
  static Result<ChatTemplate> load(const std::filesystem::path& path);
  static Result<ChatTemplate> from_source(const std::string& source);

  // `messages` is a JSON array of {"role", "content", ...}; `tools` is null or an array;
  // `extra` is an object of further variables, which may override bos_token/eos_token.
  // Errors as Template::render; raised_message() tells a template's own refusal apart.
  Result<std::string> render(const Json& messages, const Json& tools, bool add_generation_prompt,
                             const Json& extra = Json::object()) const;

  const std::string& source() const { return source_; }
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }
  void set_bos_token(std::string token) { bos_token_ = std::move(token); }
  void set_eos_token(std::string token) { eos_token_ = std::move(token); }

 private:
  ChatTemplate(std::string source, Template tmpl)
      : source_(std::move(source)), template_(std::move(tmpl)) {}

  std::string source_;
  Template template_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
};

}  // namespace kvrt::jinja
