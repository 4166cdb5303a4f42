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
  std::optional<double> partial_rotary_factor;
};

bool same_scaling(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

// Phi-3 rotates part of each head; the other families refuse anything but 1.
Result<std::optional<double>> read_partial_rotary(const JsonFields& fields, bool allowed) {
  KVRT_ASSIGN_OR_RETURN(auto partial, fields.optional_number("partial_rotary_factor"));
  if (partial && *partial != 1.0) {
    if (!allowed) {
      return fields.error(ErrorCode::kNotSupported, "partial_rotary_factor",
                          "partial rotary embedding is not supported for this architecture");
    }
    if (!(*partial > 0.0 && *partial <= 1.0)) {
      return fields.error("partial_rotary_factor", "must be in (0, 1]");
    }
  }
  return partial;
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
  if (*name == "linear") return RopeType::kLinear;
  return fields.error(ErrorCode::kNotSupported, rope_type ? "rope_type" : "type",
                      "RoPE type '" + *name + "' is not supported (default, linear, llama3)");
}

// One RoPE object; `field` is "rope_scaling" or "rope_parameters".
Result<ParsedRope> parse_rope_object(const json& object, const std::string& source,
                                     const std::string& field, bool allow_partial) {
  if (!object.is_object()) {
    return invalid_argument(source, ": field '", field, "': expected an object or null");
  }
  JsonFields fields(object, source, field);
  ParsedRope parsed;
  KVRT_ASSIGN_OR_RETURN(parsed.scaling.type, read_type(fields, object));
  const bool llama3 = parsed.scaling.type == RopeType::kLlama3;
  const bool linear = parsed.scaling.type == RopeType::kLinear;
  for (const auto& [key, value] : object.items()) {
    const bool common = key == "rope_type" || key == "type" || key == "rope_theta" ||
                        key == "partial_rotary_factor";
    const bool llama3_key = key == "factor" || key == "low_freq_factor" ||
                            key == "high_freq_factor" || key == "original_max_position_embeddings";
    if (!common && !(llama3 && llama3_key) && !(linear && key == "factor") && !value.is_null()) {
      return fields.error(ErrorCode::kNotSupported, key,
                          "RoPE setting not supported for this rope type");
    }
  }
  KVRT_ASSIGN_OR_RETURN(parsed.partial_rotary_factor, read_partial_rotary(fields, allow_partial));
  if (linear) {
    KVRT_ASSIGN_OR_RETURN(parsed.scaling.factor, fields.positive_number("factor"));
  }
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

// 5.x writes Gemma 3's RoPE as {"full_attention": {...}, "sliding_attention": {...}}.
bool keyed_by_layer_type(const json* object) {
  return object != nullptr && object->is_object() &&
         (object->contains("full_attention") || object->contains("sliding_attention"));
}

// Gemma 3's local (sliding-layer) RoPE: the "sliding_attention" entry of a keyed
// rope_parameters, else rope_local_base_freq (default 10000) with default scaling.
Status read_local_rope(const JsonFields& fields, const std::optional<ParsedRope>& keyed,
                       ModelConfig& config) {
  KVRT_ASSIGN_OR_RETURN(auto local_base, fields.optional_number("rope_local_base_freq"));
  if (local_base && !(*local_base > 0)) {
    return fields.error("rope_local_base_freq", "must be positive");
  }
  config.local_rope_theta = local_base.value_or(10000.0);
  config.local_rope_scaling = RopeScaling();
  if (!keyed) return Status();
  if (keyed->theta && local_base && *keyed->theta != *local_base) {
    return fields.error("rope_local_base_freq",
                        "disagrees with rope_parameters.sliding_attention.rope_theta");
  }
  if (keyed->theta) config.local_rope_theta = *keyed->theta;
  config.local_rope_scaling = keyed->scaling;
  return Status();
}

}  // namespace

Status read_rope(const JsonFields& fields, ModelConfig& config) {
  const bool allow_partial = config.architecture == Architecture::kPhi3;
  KVRT_ASSIGN_OR_RETURN(auto partial, read_partial_rotary(fields, allow_partial));
  std::optional<double> theta;
  if (fields.has("rope_theta")) {
    KVRT_ASSIGN_OR_RETURN(double top_theta, fields.positive_number("rope_theta"));
    theta = top_theta;
  }
  std::optional<ParsedRope> from_parameters;
  std::optional<ParsedRope> from_scaling;
  std::optional<ParsedRope> local;
  const json* parameters = fields.get("rope_parameters");
  if (keyed_by_layer_type(parameters)) {
    if (config.architecture != Architecture::kGemma3) {
      return fields.error(ErrorCode::kNotSupported, "rope_parameters",
                          "RoPE parameters per layer type are only supported for gemma3_text");
    }
    for (const auto& [key, value] : parameters->items()) {
      const std::string field = "rope_parameters." + key;
      if (key != "full_attention" && key != "sliding_attention") {
        return invalid_argument(fields.source(), ": field '", field,
                                "': unknown layer type (full_attention, sliding_attention)");
      }
      if (value.is_null()) continue;
      KVRT_ASSIGN_OR_RETURN(ParsedRope parsed,
                            parse_rope_object(value, fields.source(), field, allow_partial));
      (key == "full_attention" ? from_parameters : local) = std::move(parsed);
    }
  } else if (parameters != nullptr) {
    KVRT_ASSIGN_OR_RETURN(from_parameters, parse_rope_object(*parameters, fields.source(),
                                                             "rope_parameters", allow_partial));
  }
  if (const json* object = fields.get("rope_scaling")) {
    KVRT_ASSIGN_OR_RETURN(
        from_scaling, parse_rope_object(*object, fields.source(), "rope_scaling", allow_partial));
  }
  if (from_parameters && from_scaling &&
      !same_scaling(from_parameters->scaling, from_scaling->scaling)) {
    return fields.error("rope_scaling", "disagrees with rope_parameters");
  }
  for (const auto* parsed : {&from_parameters, &from_scaling}) {
    if (!*parsed) continue;
    if ((*parsed)->partial_rotary_factor) {
      if (partial && *partial != *(*parsed)->partial_rotary_factor) {
        return fields.error("partial_rotary_factor", "disagrees with the RoPE object's");
      }
      partial = (*parsed)->partial_rotary_factor;
    }
    if (!(*parsed)->theta) continue;
    if (theta && *theta != *(*parsed)->theta) {
      return fields.error(parsed == &from_parameters ? "rope_parameters" : "rope_scaling",
                          "rope_theta disagrees with the other rope_theta in the file");
    }
    theta = (*parsed)->theta;
  }
  // transformers' defaults: Gemma3TextConfig's rope_theta is 1e6, the others' 1e4.
  config.rope_theta = theta.value_or(config.architecture == Architecture::kGemma3 ? 1e6 : 1e4);
  config.partial_rotary_factor = partial.value_or(1.0);
  if (from_parameters) {
    config.rope_scaling = from_parameters->scaling;
  } else if (from_scaling) {
    config.rope_scaling = from_scaling->scaling;
  } else {
    config.rope_scaling = RopeScaling();
  }
  if (config.architecture == Architecture::kGemma3) {
    KVRT_RETURN_IF_ERROR(read_local_rope(fields, local, config));
  }
  return Status();
}

}  // namespace kvrt::frontend
