#include "kvrt/serve/api_error.h"

namespace kvrt::serve {

nlohmann::json ApiError::to_json() const {
  // null, not "", for absent param/code: what the OpenAI API sends.
  auto or_null = [](const std::string& text) {
    return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
  };
  return {
      {"error",
       {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

ApiError bad_field(std::string param, std::string message) {
  ApiError error;
  error.status = 400;
  error.message = std::move(message);
  error.param = std::move(param);
  error.code = "invalid_value";
  return error;
}

ApiError context_exceeded(std::string message) {
  ApiError error;
  error.status = 400;
  error.message = std::move(message);
  error.param = "messages";
  error.code = "context_length_exceeded";
  return error;
}

}  // namespace kvrt::serve
