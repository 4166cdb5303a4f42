#include "kvrt/frontend/json_fields.h"

#include <cmath>

#include "kvrt/core/mapped_file.h"

namespace kvrt::frontend {

using nlohmann::json;

Result<json> read_json_file(const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  const char* begin = reinterpret_cast<const char*>(file.data());
  json parsed = json::parse(begin, begin + file.size(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return invalid_argument(path, ": not valid JSON");
  return parsed;
}

JsonFields::JsonFields(const json& object, std::string source, std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

bool JsonFields::has(std::string_view key) const {
  return get(key) != nullptr;
}

const json* JsonFields::get(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string JsonFields::field_name(std::string_view key) const {
  std::string name = "field '";
  if (!prefix_.empty()) name += prefix_ + ".";
  name += key;
  return name + "'";
}

Status JsonFields::error(std::string_view key, std::string_view what) const {
  return error(ErrorCode::kInvalidArgument, key, what);
}

Status JsonFields::error(ErrorCode code, std::string_view key, std::string_view what) const {
  return make_error(code, source_, ": ", field_name(key), ": ", what);
}

Result<std::optional<int64_t>> JsonFields::optional_int(std::string_view key) const {
  const json* value = get(key);
  if (value == nullptr) return std::optional<int64_t>();
  if (value->is_number_unsigned()) {
    if (value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return error(key, "integer out of range");
    }
    return std::optional<int64_t>(static_cast<int64_t>(value->get<uint64_t>()));
  }
  if (value->is_number_integer()) return std::optional<int64_t>(value->get<int64_t>());
  if (value->is_number_float()) {
    // Some configs write 8192.0; accept it only when it is exactly an integer.
    const double number = value->get<double>();
    if (std::isfinite(number) && std::trunc(number) == number && std::fabs(number) < 9.0e15) {
      return std::optional<int64_t>(static_cast<int64_t>(number));
    }
  }
  return error(key, "expected an integer, got " + value->dump());
}

Result<std::optional<double>> JsonFields::optional_number(std::string_view key) const {
  const json* value = get(key);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number()) return error(key, "expected a number, got " + value->dump());
  return std::optional<double>(value->get<double>());
}

Result<std::optional<bool>> JsonFields::optional_bool(std::string_view key) const {
  const json* value = get(key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) return error(key, "expected true or false, got " + value->dump());
  return std::optional<bool>(value->get<bool>());
}

Result<std::optional<std::string>> JsonFields::optional_string(std::string_view key) const {
  const json* value = get(key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) return error(key, "expected a string, got " + value->dump());
  return std::optional<std::string>(value->get<std::string>());
}

Result<std::vector<int64_t>> JsonFields::token_ids(std::string_view key) const {
  const json* value = get(key);
  std::vector<int64_t> ids;
  if (value == nullptr) return ids;
  const json list = value->is_array() ? *value : json::array({*value});
  for (const json& id : list) {
    const bool in_range = id.is_number_unsigned()
                              ? id.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                              : id.is_number_integer() && id.get<int64_t>() >= 0;
    if (!in_range) {
      return error(key, "expected a token id or a list of them, got " + value->dump());
    }
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

Result<int64_t> JsonFields::positive_int(std::string_view key) const {
  KVRT_ASSIGN_OR_RETURN(std::optional<int64_t> value, optional_int(key));
  if (!value) return error(key, "missing");
  if (*value <= 0) return error(key, "must be positive, got " + std::to_string(*value));
  return *value;
}

Result<double> JsonFields::positive_number(std::string_view key) const {
  KVRT_ASSIGN_OR_RETURN(std::optional<double> value, optional_number(key));
  if (!value) return error(key, "missing");
  if (!(*value > 0) || !std::isfinite(*value)) {
    return error(key, "must be a positive finite number");
  }
  return *value;
}

}  // namespace kvrt::frontend
