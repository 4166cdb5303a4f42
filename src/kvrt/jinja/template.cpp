#include "kvrt/jinja/template.h"

#include "kvrt/jinja/ast.h"
#include "kvrt/jinja/interpreter.h"
#include "kvrt/jinja/lexer.h"
#include "kvrt/jinja/parser.h"

namespace kvrt::jinja {

struct Template::Impl {
  Body body;
};

Template::Template(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

Result<Template> Template::parse(std::string_view source) {
  KVRT_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  auto impl = std::make_unique<Impl>();
  KVRT_ASSIGN_OR_RETURN(impl->body, jinja::parse(tokens));
  return Template(std::move(impl));
}

Result<std::string> Template::render(const Json& context) const {
  return Interpreter::render(impl_->body, context);
}

std::optional<std::string> raised_message(const Status& status) {
  static constexpr std::string_view kMarker = "raise_exception: ";
  const std::string& message = status.message();
  size_t pos = 0;
  if (message.rfind("line ", 0) == 0) {
    pos = message.find(": ");
    if (pos == std::string::npos) return std::nullopt;
    pos += 2;
  }
  if (message.compare(pos, kMarker.size(), kMarker) != 0) return std::nullopt;
  return message.substr(pos + kMarker.size());
}

}  // namespace kvrt::jinja
