#include "kvrt/serve/request.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace kvrt::serve {
namespace {

using Json = nlohmann::ordered_json;

std::string type_name(const Json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  return "an object";
}

ApiError wrong_type(const std::string& field, const std::string& expected, const Json& value) {
  return bad_field(field, "'" + field + "' must be " + expected + ", not " + type_name(value));
}

// A number in [low, high]; absent or null keeps `out`.
std::optional<ApiError> read_number(const Json& body, const std::string& field, double low,
                                    double high, float& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return wrong_type(field, "a number", *it);
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < low || value > high) {
    char range[64];
    std::snprintf(range, sizeof(range), "between %g and %g", low, high);
    return bad_field(field, "'" + field + "' must be " + range + ", got " + it->dump());
  }
  out = static_cast<float>(value);
  return std::nullopt;
}

std::optional<ApiError> read_max_tokens(const Json& body, CompletionRequest& request) {
  for (const char* field : {"max_completion_tokens", "max_tokens"}) {
    auto it = body.find(field);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_number_integer()) return wrong_type(field, "an integer", *it);
    const int64_t value = it->get<int64_t>();
    if (value < 1 || value > std::numeric_limits<int32_t>::max()) {
      return bad_field(field, std::string("'") + field + "' must be at least 1, got " + it->dump());
    }
    request.max_tokens = static_cast<int32_t>(value);
    return std::nullopt;  // max_completion_tokens wins, as in the OpenAI API
  }
  return std::nullopt;
}

std::optional<ApiError> read_stop(const Json& body, CompletionRequest& request) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  const Json list = it->is_string() ? Json::array({*it}) : *it;
  if (!list.is_array()) return wrong_type("stop", "a string or an array of strings", *it);
  if (list.size() > 4) return bad_field("stop", "'stop' takes at most 4 strings");
  for (const Json& item : list) {
    if (!item.is_string() || item.get<std::string>().empty()) {
      return bad_field("stop", "'stop' entries must be non-empty strings");
    }
    request.stop.push_back(item.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> read_messages(const Json& body, CompletionRequest& request) {
  auto it = body.find("messages");
  if (it == body.end()) return bad_field("messages", "'messages' is required");
  if (!it->is_array() || it->empty()) {
    return bad_field("messages", "'messages' must be a non-empty array");
  }
  request.messages = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    Json message = (*it)[i];
    if (!message.is_object()) return wrong_type(field, "an object", message);
    auto role = message.find("role");
    if (role == message.end() || !role->is_string()) {
      return bad_field(field + ".role", "'" + field + ".role' must be a string");
    }
    auto content = message.find("content");
    if (content != message.end() && content->is_array()) {
      std::string text;  // text parts are joined, as the OpenAI API reads them
      for (const Json& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return bad_field(field + ".content",
                           "'" + field + ".content' parts must be {\"type\": \"text\", \"text\"}");
        }
        text += part["text"].get<std::string>();
      }
      *content = text;
    } else if (content != message.end() && !content->is_string() && !content->is_null()) {
      return wrong_type(field + ".content", "a string, an array of parts or null", *content);
    } else if (content == message.end() && *role != "assistant") {
      return bad_field(field + ".content", "'" + field + ".content' is required");
    }
    request.messages.push_back(std::move(message));
  }
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
    request.tools = *tools;
  }
  return std::nullopt;
}

std::optional<ApiError> read_prompt(const Json& body, CompletionRequest& request) {
  auto it = body.find("prompt");
  if (it == body.end()) return bad_field("prompt", "'prompt' is required");
  Json prompt = *it;
  // One prompt only: ["text"] is that text, [1, 2, 3] are token ids.
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
  if (prompt.is_string()) {
    request.prompt = prompt.get<std::string>();
    if (request.prompt.empty()) return bad_field("prompt", "'prompt' is empty");
    return std::nullopt;
  }
  if (prompt.is_array() && !prompt.empty()) {
    for (const Json& id : prompt) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return bad_field("prompt", "'prompt' must be a string or one list of token ids");
      }
      request.prompt_ids.push_back(id.get<int32_t>());
    }
    return std::nullopt;
  }
  return bad_field("prompt", "'prompt' must be a string or one list of token ids (one prompt)");
}

std::optional<ApiError> read_fields(const Json& body, CompletionRequest& request) {
  if (auto model = body.find("model"); model != body.end() && !model->is_null()) {
    if (!model->is_string()) return wrong_type("model", "a string", *model);
    request.model = model->get<std::string>();
  }
  auto error = request.endpoint == Endpoint::kChat ? read_messages(body, request)
                                                   : read_prompt(body, request);
  if (error) return error;
  if ((error = read_max_tokens(body, request))) return error;
  if ((error = read_number(body, "temperature", 0.0, 2.0, request.temperature))) return error;
  if ((error = read_number(body, "top_p", 0.0, 1.0, request.top_p))) return error;
  if (request.top_p == 0.0f) return bad_field("top_p", "'top_p' must be greater than 0");
  if ((error = read_stop(body, request))) return error;
  if (auto seed = body.find("seed"); seed != body.end() && !seed->is_null()) {
    if (!seed->is_number_integer()) return wrong_type("seed", "an integer", *seed);
    request.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                              : static_cast<uint64_t>(seed->get<int64_t>());
  }
  if (auto n = body.find("n"); n != body.end() && !n->is_null()) {
    if (!n->is_number_integer() || n->get<int64_t>() != 1) {
      return bad_field("n", "'n' must be 1: kvrt serves one choice per request");
    }
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    float value = 0.0f;
    if ((error = read_number(body, penalty, -2.0, 2.0, value))) return error;
    if (value != 0.0f) {
      return bad_field(penalty, std::string("'") + penalty + "' is not supported (only 0)");
    }
  }
  if (auto ignore = body.find("ignore_eos"); ignore != body.end() && !ignore->is_null()) {
    if (!ignore->is_boolean()) return wrong_type("ignore_eos", "a boolean", *ignore);
    request.ignore_eos = ignore->get<bool>();
  }
  if (auto stream = body.find("stream"); stream != body.end() && !stream->is_null()) {
    if (!stream->is_boolean()) return wrong_type("stream", "a boolean", *stream);
    request.stream = stream->get<bool>();
  }
  if (auto options = body.find("stream_options"); options != body.end() && !options->is_null()) {
    if (!request.stream) {
      return bad_field("stream_options", "'stream_options' is only allowed with 'stream': true");
    }
    if (!options->is_object()) return wrong_type("stream_options", "an object", *options);
    auto usage = options->find("include_usage");
    if (usage != options->end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        return wrong_type("stream_options.include_usage", "a boolean", *usage);
      }
      request.include_usage = usage->get<bool>();
    }
  }
  return std::nullopt;
}

}  // namespace

ParsedRequest parse_request(std::string_view body, Endpoint endpoint) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    ApiError error;
    error.message = "the request body is not valid JSON";
    return error;
  }
  if (!json.is_object()) {
    ApiError error;
    error.message = "the request body must be a JSON object";
    return error;
  }
  CompletionRequest request;
  request.endpoint = endpoint;
  if (auto error = read_fields(json, request)) return *error;
  return request;
}

}  // namespace kvrt::serve
