// The JSON bodies the OpenAI API answers with, for both endpoints: a whole completion,
// a streamed chunk, usage figures, and server-sent-event framing ("data: JSON\n\n",
// ending with "data: [DONE]\n\n").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kvrt/generation/sampling_stop.h"
#include "kvrt/serve/request.h"

namespace kvrt::serve {

struct Usage {
  int32_t prompt_tokens = 0;  // the whole prompt, reused part included
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens reused from the KV cache
  nlohmann::json to_json() const;
};

// Identifies one response: every chunk of a stream carries the same id and time.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
};

// "stop" for EOS and stop strings, "length" for max_tokens and the context.
std::string finish_reason(StopReason reason);

nlohmann::json completion_body(const ResponseHeader& header, const std::string& text,
                               std::string_view finish, const Usage& usage);
// A chunk of a stream: `text` as a delta; `finish` set on the last one. `first` chat
// chunks carry the role. `with_usage_null`: include_usage asks every chunk to carry
// "usage": null until the last one.
nlohmann::json chunk_body(const ResponseHeader& header, std::string_view text,
                          std::optional<std::string_view> finish, bool first, bool with_usage_null);
// The chunk include_usage adds after the last choice: no choices, only usage.
nlohmann::json usage_chunk_body(const ResponseHeader& header, const Usage& usage);

// One server-sent event carrying JSON: "data: {...}\n\n". JSON escapes newlines, so
// the payload is always one line.
std::string sse_event(const nlohmann::json& payload);
std::string sse_done();

}  // namespace kvrt::serve
