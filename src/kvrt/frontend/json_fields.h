// Typed, null-aware reads of JSON object fields for the frontend's file parsers
// (config.json, generation_config.json, the shard index). Every error names the file
// and the field, e.g. "/m/config.json: field 'rope_scaling.factor': expected a number".
// Internal to the frontend.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt::frontend {

// Reads and parses a small JSON file. Missing file: NotFound; bad JSON: InvalidArgument.
Result<nlohmann::json> read_json_file(const std::string& path);

class JsonFields {
 public:
  // `object` must outlive this reader. `source` names the file; `prefix` the enclosing
  // field ("rope_scaling") so nested errors read "rope_scaling.factor".
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix = "");

  // Absent and null both read as nullopt: Hugging Face writes null for "unset".
  bool has(std::string_view key) const;
  const nlohmann::json* get(std::string_view key) const;
  Result<std::optional<int64_t>> optional_int(std::string_view key) const;
  Result<std::optional<double>> optional_number(std::string_view key) const;
  Result<std::optional<bool>> optional_bool(std::string_view key) const;
  Result<std::optional<std::string>> optional_string(std::string_view key) const;
  // A token id or a list of them (eos_token_id); absent or null gives an empty list.
  Result<std::vector<int64_t>> token_ids(std::string_view key) const;
  // Present, non-null, and > 0.
  Result<int64_t> positive_int(std::string_view key) const;
  Result<double> positive_number(std::string_view key) const;

  // "field 'prefix.key'"
  std::string field_name(std::string_view key) const;
  // InvalidArgument "<source>: field '<prefix.key>': <what>".
  Status error(std::string_view key, std::string_view what) const;
  Status error(ErrorCode code, std::string_view key, std::string_view what) const;
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace kvrt::frontend
