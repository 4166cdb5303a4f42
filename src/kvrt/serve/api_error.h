// Errors as the OpenAI API returns them: an HTTP status and
// {"error": {"message", "type", "param", "code"}}, so that clients (the openai
// packages among them) raise their usual exception classes with our message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvrt::serve {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty: none
  std::string code;   // a machine-readable reason; empty: none

  nlohmann::json to_json() const;
};

// 400: a field is missing, has the wrong type or is out of range.
ApiError bad_field(std::string param, std::string message);
// 400 with code "context_length_exceeded": the prompt does not fit.
ApiError context_exceeded(std::string message);

}  // namespace kvrt::serve
