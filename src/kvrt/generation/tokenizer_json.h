// Field access for tokenizer.json that names the offending field in every error
// ("model.merges[12]: expected a string"). `where` is always the JSON path of the
// object being read, so messages point at the exact field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kvrt/core/result.h"

namespace kvrt::tok {

using Json = nlohmann::json;

std::string field_path(std::string_view where, std::string_view key);
std::string index_path(std::string_view where, size_t index);

// The member `key` of obj; an error when obj is not an object or the member is
// missing or null.
Result<const Json*> required_field(const Json& obj, std::string_view key, std::string_view where);
// The member `key`, or nullptr when it is missing or null.
const Json* optional_field(const Json& obj, std::string_view key);

Result<std::string> string_field(const Json& obj, std::string_view key, std::string_view where);
Result<std::optional<std::string>> optional_string_field(const Json& obj, std::string_view key,
                                                         std::string_view where);
Result<bool> bool_field(const Json& obj, std::string_view key, bool fallback,
                        std::string_view where);
Result<int64_t> int_field(const Json& obj, std::string_view key, std::string_view where);
// A string member holding exactly one Unicode character (Metaspace "replacement").
Result<std::string> char_field(const Json& obj, std::string_view key, std::string_view where);

// The "type" of a component object.
Result<std::string> type_field(const Json& obj, std::string_view where);
Result<const Json*> array_field(const Json& obj, std::string_view key, std::string_view where);

}  // namespace kvrt::tok
