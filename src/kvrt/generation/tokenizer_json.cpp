#include "kvrt/generation/tokenizer_json.h"

#include "kvrt/generation/utf8.h"

namespace kvrt::tok {

std::string field_path(std::string_view where, std::string_view key) {
  if (where.empty()) return std::string(key);
  std::string path(where);
  path += '.';
  path += key;
  return path;
}

std::string index_path(std::string_view where, size_t index) {
  return std::string(where) + "[" + std::to_string(index) + "]";
}

Result<const Json*> required_field(const Json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) return invalid_argument(where, ": expected an object");
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return invalid_argument(field_path(where, key), ": missing");
  }
  return &*it;
}

const Json* optional_field(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::string> string_field(const Json& obj, std::string_view key, std::string_view where) {
  KVRT_ASSIGN_OR_RETURN(const Json* value, required_field(obj, key, where));
  if (!value->is_string()) return invalid_argument(field_path(where, key), ": expected a string");
  return value->get<std::string>();
}

Result<std::optional<std::string>> optional_string_field(const Json& obj, std::string_view key,
                                                         std::string_view where) {
  const Json* value = optional_field(obj, key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) return invalid_argument(field_path(where, key), ": expected a string");
  return std::optional<std::string>(value->get<std::string>());
}

Result<bool> bool_field(const Json& obj, std::string_view key, bool fallback,
                        std::string_view where) {
  const Json* value = optional_field(obj, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) return invalid_argument(field_path(where, key), ": expected a boolean");
  return value->get<bool>();
}

Result<int64_t> int_field(const Json& obj, std::string_view key, std::string_view where) {
  KVRT_ASSIGN_OR_RETURN(const Json* value, required_field(obj, key, where));
  if (!value->is_number_integer()) {
    return invalid_argument(field_path(where, key), ": expected an integer");
  }
  return value->get<int64_t>();
}

Result<std::string> char_field(const Json& obj, std::string_view key, std::string_view where) {
  KVRT_ASSIGN_OR_RETURN(std::string text, string_field(obj, key, where));
  size_t pos = 0;
  if (!text.empty()) utf8::decode(text, pos);
  if (text.empty() || pos != text.size() || !utf8::is_valid(text)) {
    return invalid_argument(field_path(where, key), ": expected exactly one character, got '", text,
                            "'");
  }
  return text;
}

Result<std::string> type_field(const Json& obj, std::string_view where) {
  return string_field(obj, "type", where);
}

Result<const Json*> array_field(const Json& obj, std::string_view key, std::string_view where) {
  KVRT_ASSIGN_OR_RETURN(const Json* value, required_field(obj, key, where));
  if (!value->is_array()) return invalid_argument(field_path(where, key), ": expected a list");
  return value;
}

}  // namespace kvrt::tok
