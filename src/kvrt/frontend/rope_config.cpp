#include "kvrt/frontend/rope_config.h"

#include <cmath>
#include <optional>
#include <string>

namespace kvrt::frontend {
namespace {

using nlohmann::json;

struct ParsedRope {
  std::optional<double> theta;
  RopeScaling scaling;
};

bool same_scaling(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

Status check_partial_rotary(const JsonFields& fields) {
  KVRT_ASSIGN_OR_RETURN(auto partial, fields.optional_number("partial_rotary_factor"));
  if (partial && *partial != 1.0) {
    return fields.error(ErrorCode::kNotSupported, "partial_rotary_factor",
                        "partial rotary embedding is not supported");
  }
  return Status();
}

Result<RopeType> read_type(const JsonFields& fields, const json& object) {
  KVRT_ASSIGN_OR_RETURN(auto rope_type, fields.optional_string("rope_type"));
  KVRT_ASSIGN_OR_RETURN(auto type, fields.optional_string("type"));  // older spelling
  if (rope_type && type && *rope_type != *type) {
    return fields.error("type", "'" + *type + "' disagrees with rope_type '" + *rope_type + "'");
  }
  const std::optional<std::string> name = rope_type ? rope_type : type;
  if (!name) {
    for (const auto& [key, value] : object.items()) {
      if (key != "rope_theta" && !value.is_null()) return fields.error("rope_type", "missing");
    }
    return RopeType::kDefault;
  }
  if (*name == "default") return RopeType::kDefault;
  if (*name == "llama3") return RopeType::kLlama3;
  return fields.error(ErrorCode::kNotSupported, rope_type ? "rope_type" : "type",
                      "RoPE type '" + *name + "' is not supported (default, llama3)");
}

// One RoPE object; `field` is "rope_scaling" or "rope_parameters".
Result<ParsedRope> parse_rope_object(const json& object, const std::string& source,
                                     const std::string& field) {
  if (!object.is_object()) {
    return invalid_argument(source, ": field '", field, "': expected an object or null");
  }
  JsonFields fields(object, source, field);
  ParsedRope parsed;
  KVRT_ASSIGN_OR_RETURN(parsed.scaling.type, read_type(fields, object));
  const bool llama3 = parsed.scaling.type == RopeType::kLlama3;
  for (const auto& [key, value] : object.items()) {
    const bool common = key == "rope_type" || key == "type" || key == "rope_theta" ||
                        key == "partial_rotary_factor";
    const bool llama3_key = key == "factor" || key == "low_freq_factor" ||
                            key == "high_freq_factor" || key == "original_max_position_embeddings";
    if (!common && !(llama3 && llama3_key) && !value.is_null()) {
      return fields.error(ErrorCode::kNotSupported, key,
                          "RoPE setting not supported for this rope type");
    }
  }
  KVRT_RETURN_IF_ERROR(check_partial_rotary(fields));
  if (fields.has("rope_theta")) {
    KVRT_ASSIGN_OR_RETURN(double theta, fields.positive_number("rope_theta"));
    parsed.theta = theta;
  }
  if (llama3) {
    RopeScaling& s = parsed.scaling;
    KVRT_ASSIGN_OR_RETURN(s.factor, fields.positive_number("factor"));
    KVRT_ASSIGN_OR_RETURN(s.low_freq_factor, fields.positive_number("low_freq_factor"));
    KVRT_ASSIGN_OR_RETURN(s.high_freq_factor, fields.positive_number("high_freq_factor"));
    KVRT_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                          fields.positive_int("original_max_position_embeddings"));
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      return fields.error("high_freq_factor", "must be above low_freq_factor");
    }
  }
  return parsed;
}

}  // namespace

Status read_rope(const JsonFields& fields, ModelConfig& config) {
  KVRT_RETURN_IF_ERROR(check_partial_rotary(fields));
  std::optional<double> theta;
  if (fields.has("rope_theta")) {
    KVRT_ASSIGN_OR_RETURN(double top_theta, fields.positive_number("rope_theta"));
    theta = top_theta;
  }
  std::optional<ParsedRope> from_parameters;
  std::optional<ParsedRope> from_scaling;
  if (const json* object = fields.get("rope_parameters")) {
    KVRT_ASSIGN_OR_RETURN(from_parameters,
                          parse_rope_object(*object, fields.source(), "rope_parameters"));
  }
  if (const json* object = fields.get("rope_scaling")) {
    KVRT_ASSIGN_OR_RETURN(from_scaling,
                          parse_rope_object(*object, fields.source(), "rope_scaling"));
  }
  if (from_parameters && from_scaling &&
      !same_scaling(from_parameters->scaling, from_scaling->scaling)) {
    return fields.error("rope_scaling", "disagrees with rope_parameters");
  }
  for (const auto* parsed : {&from_parameters, &from_scaling}) {
    if (!*parsed || !(*parsed)->theta) continue;
    if (theta && *theta != *(*parsed)->theta) {
      return fields.error(parsed == &from_parameters ? "rope_parameters" : "rope_scaling",
                          "rope_theta disagrees with the other rope_theta in the file");
    }
    theta = (*parsed)->theta;
  }
  config.rope_theta = theta.value_or(10000.0);
  if (from_parameters) {
    config.rope_scaling = from_parameters->scaling;
  } else if (from_scaling) {
    config.rope_scaling = from_scaling->scaling;
  } else {
    config.rope_scaling = RopeScaling();
  }
  return Status();
}

}  // namespace kvrt::frontend
