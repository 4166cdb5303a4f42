#include "kvrt/jinja/template.h"

#include <algorithm>
#include <cstdio>

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

namespace {

// Errors quote names and literals from the template or its data, which may hold line
// breaks and other control characters; the message stays one line (as every kvrt error
// is), with them escaped.
Status one_line(const Status& status) {
  const std::string& message = status.message();
  if (std::none_of(message.begin(), message.end(),
                   [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
    return status;
  }
  std::string escaped;
  for (char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      escaped += "\\n";
    } else if (c == '\r') {
      escaped += "\\r";
    } else if (c == '\t') {
      escaped += "\\t";
    } else if (byte < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
      escaped += hex;
    } else {
      escaped += c;
    }
  }
  return Status(status.code(), std::move(escaped));
}

}  // namespace

Result<Template> Template::parse(std::string_view source) {
  auto impl = std::make_unique<Impl>();
  Status parsed = [&]() -> Status {
    KVRT_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
    KVRT_ASSIGN_OR_RETURN(impl->body, jinja::parse(tokens));
    return Status();
  }();
  if (!parsed.ok()) return one_line(parsed);
  return Template(std::move(impl));
}

Result<std::string> Template::render(const Json& context) const {
  Result<std::string> text = Interpreter::render(impl_->body, context);
  // A template's own raise_exception message is its text, passed on as written.
  if (!text.ok() && !raised_message(text.status())) return one_line(text.status());
  return text;
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
