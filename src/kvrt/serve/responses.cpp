#include "kvrt/serve/responses.h"

namespace kvrt::serve {

using Json = nlohmann::json;

Json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

std::string finish_reason(StopReason reason) {
  switch (reason) {
    case StopReason::kMaxNewTokens:
    case StopReason::kMaxContext:
      return "length";
    default:
      return "stop";
  }
}

namespace {

Json base(const ResponseHeader& header, std::string_view object) {
  return {
      {"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
}

Json nullable(std::optional<std::string_view> text) {
  return text ? Json(std::string(*text)) : Json(nullptr);
}

}  // namespace

Json completion_body(const ResponseHeader& header, const std::string& text, std::string_view finish,
                     const Usage& usage) {
  Json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
  Json body;
  if (header.endpoint == Endpoint::kChat) {
    body = base(header, "chat.completion");
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    body = base(header, "text_completion");
    choice["text"] = text;
  }
  body["choices"] = Json::array({choice});
  body["usage"] = usage.to_json();
  return body;
}

Json chunk_body(const ResponseHeader& header, std::string_view text,
                std::optional<std::string_view> finish, bool first, bool with_usage_null) {
  Json choice = {{"index", 0}, {"finish_reason", nullable(finish)}, {"logprobs", nullptr}};
  Json body;
  if (header.endpoint == Endpoint::kChat) {
    body = base(header, "chat.completion.chunk");
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !finish) delta["content"] = std::string(text);
    choice["delta"] = std::move(delta);
  } else {
    body = base(header, "text_completion");
    choice["text"] = std::string(text);
  }
  body["choices"] = Json::array({choice});
  if (with_usage_null) body["usage"] = nullptr;
  return body;
}

Json usage_chunk_body(const ResponseHeader& header, const Usage& usage) {
  Json body = base(
      header, header.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = Json::array();
  body["usage"] = usage.to_json();
  return body;
}

std::string sse_event(const Json& payload) {
  // Invalid UTF-8 (a token cut inside a character) is replaced, never thrown on.
  return "data: " + payload.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace kvrt::serve
