// The body of POST /v1/chat/completions and /v1/completions, parsed and checked
// before anything reaches the model. Every refusal names the field (ApiError::param)
// in OpenAI's shape; fields kvrt does not read (user, logit_bias, ...) are ignored as
// the OpenAI API ignores unknown ones, while fields that would change the output and
// that kvrt cannot honour (n > 1, penalties) are refused rather than ignored.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvrt/serve/api_error.h"

namespace kvrt::serve {

enum class Endpoint { kChat, kCompletion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;                  // empty: not given
  nlohmann::ordered_json messages;    // chat: [{"role", "content": string}, ...]
  nlohmann::ordered_json tools;       // chat: null or the request's array
  std::string prompt;                 // completion: text...
  std::vector<int32_t> prompt_ids;    // ...or token ids
  std::optional<int32_t> max_tokens;  // nullopt: until EOS or the context ends
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;  // nullopt: a fresh seed per request
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // an extension vLLM has too: generate max_tokens tokens
};

using ParsedRequest = std::variant<CompletionRequest, ApiError>;

// Parses a request body. Chat content given as a list of text parts is joined into
// one string (image or audio parts are refused: the models are text-only).
ParsedRequest parse_request(std::string_view body, Endpoint endpoint);

}  // namespace kvrt::serve
