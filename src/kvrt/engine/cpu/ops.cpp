#include "kvrt/engine/cpu/ops.h"

#include <cmath>

#include "kvrt/engine/cpu/kernels.h"

namespace kvrt::engine::cpu {
namespace {

struct OpName {
  std::string_view name;
  OpKind kind;
};
constexpr OpName kOpNames[] = {
    {"embedding", OpKind::kEmbedding},
    {"rms_norm", OpKind::kRmsNorm},
    {"linear", OpKind::kLinear},
    {"rope", OpKind::kRope},
    {"kv_cache_write", OpKind::kKvCacheWrite},
    {"attention", OpKind::kAttention},
    {"silu_mul", OpKind::kSiluMul},
    {"add", OpKind::kAdd},
    {"take_last", OpKind::kTakeLast},
    {"argmax", OpKind::kArgmax},
    {"scale", OpKind::kScale},
    {"gelu_tanh_mul", OpKind::kGeluTanhMul},
    {"softcap", OpKind::kSoftcap},
    {"slice", OpKind::kSlice},
};

Result<double> number_attr(const nlohmann::json& attrs, std::string_view node, const char* key) {
  auto it = attrs.find(key);
  if (it == attrs.end() || !it->is_number()) {
    return invalid_program("node '", node, "': attribute '", key, "' must be a number");
  }
  return it->get<double>();
}

Result<int64_t> positive_int_attr(const nlohmann::json& attrs, std::string_view node,
                                  const char* key) {
  auto it = attrs.find(key);
  if (it == attrs.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
    return invalid_program("node '", node, "': attribute '", key, "' must be a positive integer");
  }
  return it->get<int64_t>();
}

// An optional attribute: absent or null gives `fallback`.
Result<int64_t> optional_positive_int_attr(const nlohmann::json& attrs, std::string_view node,
                                           const char* key, int64_t fallback) {
  auto it = attrs.find(key);
  if (it == attrs.end() || it->is_null()) return fallback;
  return positive_int_attr(attrs, node, key);
}

Result<bool> optional_bool_attr(const nlohmann::json& attrs, std::string_view node,
                                const char* key) {
  auto it = attrs.find(key);
  if (it == attrs.end() || it->is_null()) return false;
  if (!it->is_boolean()) {
    return invalid_program("node '", node, "': attribute '", key, "' must be a boolean");
  }
  return it->get<bool>();
}

Result<kernels::RopeScaling> rope_scaling_attr(const nlohmann::json& attrs, std::string_view node) {
  kernels::RopeScaling scaling;
  auto it = attrs.find("scaling");
  if (it == attrs.end() || it->is_null()) return scaling;
  if (!it->is_object()) {
    return invalid_program("node '", node, "': attribute 'scaling' must be an object");
  }
  const nlohmann::json& object = *it;
  auto type = object.find("type");
  if (type == object.end()) type = object.find("rope_type");
  if (type == object.end() || !type->is_string()) {
    return invalid_program("node '", node, "': attribute 'scaling.type' must be a string");
  }
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "default") return scaling;
  if (name == "linear") {
    scaling.type = kernels::RopeScaling::Type::kLinear;
    KVRT_ASSIGN_OR_RETURN(scaling.factor, number_attr(object, node, "factor"));
    if (!(scaling.factor > 0)) {
      return invalid_program("node '", node, "': linear rope scaling needs factor > 0");
    }
    return scaling;
  }
  if (name != "llama3") {
    return invalid_program("node '", node, "': unknown rope scaling type '", name, "'");
  }
  scaling.type = kernels::RopeScaling::Type::kLlama3;
  KVRT_ASSIGN_OR_RETURN(scaling.factor, number_attr(object, node, "factor"));
  KVRT_ASSIGN_OR_RETURN(scaling.low_freq_factor, number_attr(object, node, "low_freq_factor"));
  KVRT_ASSIGN_OR_RETURN(scaling.high_freq_factor, number_attr(object, node, "high_freq_factor"));
  KVRT_ASSIGN_OR_RETURN(scaling.original_max_position_embeddings,
                        number_attr(object, node, "original_max_position_embeddings"));
  if (!(scaling.factor > 0) || !(scaling.high_freq_factor > scaling.low_freq_factor) ||
      !(scaling.low_freq_factor > 0)) {
    return invalid_program("node '", node, "': llama3 rope scaling factors are inconsistent");
  }
  return scaling;
}

}  // namespace

Result<OpKind> parse_op_kind(std::string_view op) {
  for (const OpName& entry : kOpNames) {
    if (entry.name == op) return entry.kind;
  }
  return not_supported("unknown op '", op, "'");
}

std::string_view op_kind_name(OpKind kind) {
  for (const OpName& entry : kOpNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "invalid";
}

bool op_arity_ok(OpKind kind, size_t num_inputs, size_t num_outputs) {
  if (num_outputs != 1) return false;
  switch (kind) {
    case OpKind::kEmbedding:
    case OpKind::kRmsNorm:
    case OpKind::kRope:
    case OpKind::kSiluMul:
    case OpKind::kAdd:
    case OpKind::kGeluTanhMul:
      return num_inputs == 2;
    case OpKind::kScale:
    case OpKind::kSoftcap:
    case OpKind::kSlice:
      return num_inputs == 1;
    case OpKind::kLinear:
      return num_inputs == 2 || num_inputs == 3;
    case OpKind::kKvCacheWrite:
      return num_inputs == 3;
    case OpKind::kAttention:
      return num_inputs == 4;
    case OpKind::kTakeLast:
    case OpKind::kArgmax:
      return num_inputs == 1;
  }
  return false;
}

Result<PreparedOp> prepare_op(std::string_view op, std::string_view node,
                              const nlohmann::json& attributes) {
  PreparedOp prepared;
  KVRT_ASSIGN_OR_RETURN(prepared.kind, parse_op_kind(op));
  prepared.node = std::string(node);
  const nlohmann::json& attrs = attributes;
  switch (prepared.kind) {
    case OpKind::kRmsNorm: {
      KVRT_ASSIGN_OR_RETURN(double eps, number_attr(attrs, node, "eps"));
      if (!(eps >= 0)) return invalid_program("node '", node, "': eps must be >= 0");
      prepared.eps = static_cast<float>(eps);
      KVRT_ASSIGN_OR_RETURN(prepared.unit_offset, optional_bool_attr(attrs, node, "unit_offset"));
      KVRT_ASSIGN_OR_RETURN(prepared.norm_width,
                            optional_positive_int_attr(attrs, node, "head_dim", 0));
      break;
    }
    case OpKind::kRope: {
      KVRT_ASSIGN_OR_RETURN(prepared.num_heads, positive_int_attr(attrs, node, "num_heads"));
      KVRT_ASSIGN_OR_RETURN(prepared.head_dim, positive_int_attr(attrs, node, "head_dim"));
      KVRT_ASSIGN_OR_RETURN(double theta, number_attr(attrs, node, "theta"));
      if (prepared.head_dim % 2 != 0 || !(theta > 0)) {
        return invalid_program("node '", node, "': rope needs an even head_dim and theta > 0");
      }
      KVRT_ASSIGN_OR_RETURN(prepared.rotary_dim, optional_positive_int_attr(
                                                     attrs, node, "rotary_dim", prepared.head_dim));
      if (prepared.rotary_dim % 2 != 0 || prepared.rotary_dim > prepared.head_dim) {
        return invalid_program("node '", node, "': rotary_dim ", prepared.rotary_dim,
                               " must be even and at most head_dim ", prepared.head_dim);
      }
      KVRT_ASSIGN_OR_RETURN(kernels::RopeScaling scaling, rope_scaling_attr(attrs, node));
      prepared.inv_freq = kernels::rope_inv_freq(prepared.rotary_dim, theta, scaling);
      break;
    }
    case OpKind::kAttention: {
      KVRT_ASSIGN_OR_RETURN(prepared.num_heads, positive_int_attr(attrs, node, "num_heads"));
      KVRT_ASSIGN_OR_RETURN(prepared.num_kv_heads, positive_int_attr(attrs, node, "num_kv_heads"));
      KVRT_ASSIGN_OR_RETURN(prepared.head_dim, positive_int_attr(attrs, node, "head_dim"));
      KVRT_ASSIGN_OR_RETURN(double scale, number_attr(attrs, node, "scale"));
      if (prepared.num_heads % prepared.num_kv_heads != 0) {
        return invalid_program("node '", node, "': num_heads ", prepared.num_heads,
                               " is not a multiple of num_kv_heads ", prepared.num_kv_heads);
      }
      prepared.scale = static_cast<float>(scale);
      KVRT_ASSIGN_OR_RETURN(prepared.window, optional_positive_int_attr(attrs, node, "window", 0));
      break;
    }
    case OpKind::kScale: {
      KVRT_ASSIGN_OR_RETURN(double factor, number_attr(attrs, node, "factor"));
      prepared.factor = static_cast<float>(factor);
      break;
    }
    case OpKind::kSoftcap: {
      KVRT_ASSIGN_OR_RETURN(double cap, number_attr(attrs, node, "cap"));
      if (!(cap > 0)) return invalid_program("node '", node, "': cap must be > 0");
      prepared.factor = static_cast<float>(cap);
      break;
    }
    case OpKind::kSlice: {
      auto begin = attrs.find("begin");
      if (begin == attrs.end() || !begin->is_number_integer() || begin->get<int64_t>() < 0) {
        return invalid_program("node '", node, "': attribute 'begin' must be an integer >= 0");
      }
      prepared.begin = begin->get<int64_t>();
      KVRT_ASSIGN_OR_RETURN(prepared.size, positive_int_attr(attrs, node, "size"));
      break;
    }
    default:
      break;
  }
  return prepared;
}

}  // namespace kvrt::engine::cpu
