// A Jinja template as transformers renders chat templates: parsed once, rendered many
// times against a JSON context. Rendering writes into a private string and returns it
// whole, or an error and nothing: output is never partial.
//
//   KVRT_ASSIGN_OR_RETURN(auto tmpl, jinja::Template::parse(source));
//   KVRT_ASSIGN_OR_RETURN(std::string text, tmpl.render({{"messages", messages}}));
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvrt/core/result.h"
#include "kvrt/jinja/value.h"

namespace kvrt::jinja {

struct Stmt;

class Template {
 public:
  // Errors: kInvalidArgument for malformed source ("line 3: expected ')', got '%}'"),
  // kNotSupported for Jinja features outside the supported subset (docs/chat-templates.md).
  static Result<Template> parse(std::string_view source);

  // `context` must be a JSON object; its members become the template's variables.
  // Errors name the line: kNotSupported for an unknown filter, test or method,
  // kInvalidArgument for type errors, undefined attribute access, and raise_exception.
  Result<std::string> render(const Json& context) const;

  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;
  ~Template();

 private:
  struct Impl;
  explicit Template(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The message given to raise_exception when `status` came from one, else nullopt.
std::optional<std::string> raised_message(const Status& status);

}  // namespace kvrt::jinja
