// Blob metadata <-> JSON, through nlohmann-json only (A2). Parsing is guarded by a
// parser callback that refuses duplicate keys (two readers must never disagree on
// which one wins) and nesting beyond kBlobMaxJsonDepth; field types are then checked
// with errors that name the field ("metadata.outputs[2].name: ...").
#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "kvrt/format/blob_internal.h"

namespace kvrt::format {
namespace {

using json = nlohmann::json;

// Thrown by the parser callback, caught in parse_blob_metadata; never escapes.
struct JsonRefused {
  std::string message;
};

// Tracks the open containers during parsing so a refusal can name where it happened.
class StructureGuard {
 public:
  bool on_event(json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (frames_.size() >= static_cast<size_t>(kBlobMaxJsonDepth)) {
          throw JsonRefused{path(frames_.size()) + ": JSON nested deeper than " +
                            std::to_string(kBlobMaxJsonDepth) + " levels"};
        }
        frames_.push_back({event == json::parse_event_t::object_start, 0, {}, {}});
        break;
      case json::parse_event_t::key: {
        Frame& frame = frames_.back();
        frame.key = parsed.get_ref<const std::string&>();
        if (!frame.keys.insert(frame.key).second) {
          throw JsonRefused{path(frames_.size() - 1) + ": duplicate key '" +
                            detail::printable(frame.key) + "'"};
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        element_done();
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object;
    size_t index;  // of the current element, for arrays
    std::string key;
    std::set<std::string> keys;
  };

  void element_done() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().index;
  }

  // The path selected by the first `count` open containers.
  std::string path(size_t count) const {
    std::string out = "metadata";
    for (size_t i = 0; i < count; ++i) {
      const Frame& frame = frames_[i];
      out += frame.is_object ? "." + detail::printable(frame.key)
                             : "[" + std::to_string(frame.index) + "]";
    }
    return out;
  }

  std::vector<Frame> frames_;
};

// what() is "[json.exception.parse_error.101] parse error at ...: <detail>".
std::string json_error_detail(const json::exception& error) {
  std::string_view what = error.what();
  if (const size_t bracket = what.find("] "); bracket != std::string_view::npos) {
    what.remove_prefix(bracket + 2);
  }
  return detail::printable(what, /*escape_high=*/true);
}

std::string type_of(const json& value) {
  return value.is_number_integer() ? "integer" : value.type_name();
}

Status check_object(const json& value, const std::string& path,
                    std::initializer_list<std::string_view> allowed, bool strict_keys) {
  if (!value.is_object()) {
    return invalid_program(path, ": must be an object, got ", type_of(value));
  }
  if (!strict_keys) return Status();
  for (const auto& [key, unused] : value.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return invalid_program(path, ": unknown key '", detail::printable(key), "'");
    }
  }
  return Status();
}

Result<std::string> get_string(const json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) return invalid_program(path, ".", key, ": missing");
  if (!it->is_string()) {
    return invalid_program(path, ".", key, ": must be a string, got ", type_of(*it));
  }
  return it->get<std::string>();
}

Result<int64_t> get_int(const json& value, const std::string& path) {
  if (!value.is_number_integer()) {
    return invalid_program(path, ": must be an integer, got ", type_of(value));
  }
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return invalid_program(path, ": ", value.get<uint64_t>(), " is out of range");
  }
  return value.get<int64_t>();
}

Result<graph::Dim> parse_dim(const json& value, const std::string& path, bool strict_keys) {
  if (value.is_number()) {
    KVRT_ASSIGN_OR_RETURN(int64_t size, get_int(value, path));
    return graph::Dim::fixed(size);
  }
  if (!value.is_object()) {
    return invalid_program(path, ": a dimension must be an integer or an object, got ",
                           type_of(value));
  }
  KVRT_RETURN_IF_ERROR(check_object(value, path, {"symbol", "size", "min", "max"}, strict_keys));
  KVRT_ASSIGN_OR_RETURN(std::string symbol, get_string(value, "symbol", path));
  if (symbol.empty()) return invalid_program(path, ".symbol: empty symbol");
  graph::Dim dim = graph::Dim::dynamic(std::move(symbol), 0, 0);
  for (const auto& [key, field] : {std::pair{"min", &dim.min}, std::pair{"max", &dim.max}}) {
    const auto it = value.find(key);
    if (it == value.end()) return invalid_program(path, ".", key, ": missing");
    KVRT_ASSIGN_OR_RETURN(*field, get_int(*it, path + "." + key));
  }
  if (const auto it = value.find("size"); it != value.end()) {
    KVRT_ASSIGN_OR_RETURN(dim.size, get_int(*it, path + ".size"));
  }
  return dim;
}

Result<DType> parse_dtype_name(const json& object, const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(std::string name, get_string(object, "dtype", path));
  for (DType dtype : kAllDTypes) {
    if (dtype_name(dtype) == name) return dtype;  // canonical names only
  }
  return invalid_program(path, ".dtype: unknown dtype '", detail::printable(name),
                         "' (expected f32, f16, bf16, i32, i64, u8 or bool)");
}

Result<BindingSpec> parse_binding(const json& value, const std::string& path, bool strict_keys) {
  KVRT_RETURN_IF_ERROR(check_object(value, path, {"name", "dtype", "shape"}, strict_keys));
  BindingSpec binding;
  KVRT_ASSIGN_OR_RETURN(binding.name, get_string(value, "name", path));
  KVRT_ASSIGN_OR_RETURN(binding.dtype, parse_dtype_name(value, path));
  const auto shape = value.find("shape");
  if (shape == value.end()) return invalid_program(path, ".shape: missing");
  if (!shape->is_array()) {
    return invalid_program(path, ".shape: must be an array, got ", type_of(*shape));
  }
  for (size_t d = 0; d < shape->size(); ++d) {
    const std::string dim_path = path + ".shape[" + std::to_string(d) + "]";
    KVRT_ASSIGN_OR_RETURN(graph::Dim dim, parse_dim((*shape)[d], dim_path, strict_keys));
    binding.shape.push_back(std::move(dim));
  }
  return binding;
}

Result<AliasSpec> parse_alias(const json& value, const std::string& path, bool strict_keys) {
  KVRT_RETURN_IF_ERROR(check_object(value, path, {"output", "input", "kind"}, strict_keys));
  AliasSpec alias;
  KVRT_ASSIGN_OR_RETURN(alias.output, get_string(value, "output", path));
  KVRT_ASSIGN_OR_RETURN(alias.input, get_string(value, "input", path));
  if (value.contains("kind")) {  // absent means kv_cache_update
    KVRT_ASSIGN_OR_RETURN(std::string kind, get_string(value, "kind", path));
    if (kind == alias_kind_name(AliasKind::kKvCacheUpdate)) {
      alias.kind = AliasKind::kKvCacheUpdate;
    } else if (kind == alias_kind_name(AliasKind::kUser)) {
      alias.kind = AliasKind::kUser;
    } else {
      return invalid_program(path, ".kind: unknown alias kind '", detail::printable(kind),
                             "' (expected kv_cache_update or user)");
    }
  }
  return alias;
}

// Parses root[key] as an array of T with `parse`; a missing key is an error only when
// `required`.
template <typename T, typename Parse>
Status parse_list(const json& root, const char* key, bool required, bool strict_keys, Parse parse,
                  std::vector<T>& out) {
  const std::string path = std::string("metadata.") + key;
  const auto it = root.find(key);
  if (it == root.end()) {
    if (!required) return Status();
    return invalid_program(path, ": missing (a blob must list its inputs and outputs)");
  }
  if (!it->is_array()) return invalid_program(path, ": must be an array, got ", type_of(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(T item,
                          parse((*it)[i], path + "[" + std::to_string(i) + "]", strict_keys));
    out.push_back(std::move(item));
  }
  return Status();
}

json dim_to_json(const graph::Dim& dim) {
  if (!dim.is_dynamic()) return dim.size;
  return {{"symbol", dim.symbol}, {"min", dim.min}, {"max", dim.max}};
}

json binding_to_json(const BindingSpec& binding) {
  json shape = json::array();
  for (const graph::Dim& dim : binding.shape) shape.push_back(dim_to_json(dim));
  return {{"name", binding.name}, {"dtype", dtype_name(binding.dtype)}, {"shape", shape}};
}

}  // namespace

namespace detail {

Result<BlobMetadata> parse_blob_metadata(std::string_view text, bool strict_keys) {
  json root;
  try {
    StructureGuard guard;
    root = json::parse(
        text.begin(), text.end(),
        [&guard](int, json::parse_event_t event, json& parsed) {
          return guard.on_event(event, parsed);
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const JsonRefused& refused) {
    return invalid_program(refused.message);
  } catch (const json::parse_error& error) {
    return invalid_program("metadata: invalid JSON at byte ", error.byte, ": ",
                           json_error_detail(error));
  } catch (const json::exception& error) {  // e.g. out_of_range: number overflow
    return invalid_program("metadata: invalid JSON: ", json_error_detail(error));
  }

  KVRT_RETURN_IF_ERROR(check_object(root, "metadata",
                                    {"inputs", "outputs", "aliases", "target_device", "producer"},
                                    strict_keys));
  BlobMetadata metadata;
  KVRT_RETURN_IF_ERROR(
      parse_list(root, "inputs", true, strict_keys, parse_binding, metadata.inputs));
  KVRT_RETURN_IF_ERROR(
      parse_list(root, "outputs", true, strict_keys, parse_binding, metadata.outputs));
  KVRT_RETURN_IF_ERROR(
      parse_list(root, "aliases", false, strict_keys, parse_alias, metadata.aliases));
  if (root.contains("target_device")) {
    KVRT_ASSIGN_OR_RETURN(metadata.target_device, get_string(root, "target_device", "metadata"));
  }
  if (const auto it = root.find("producer"); it != root.end()) metadata.producer = *it;
  return metadata;
}

}  // namespace detail

nlohmann::json metadata_to_json(const BlobMetadata& metadata) {
  json inputs = json::array();
  for (const BindingSpec& binding : metadata.inputs) inputs.push_back(binding_to_json(binding));
  json outputs = json::array();
  for (const BindingSpec& binding : metadata.outputs) outputs.push_back(binding_to_json(binding));
  json aliases = json::array();
  for (const AliasSpec& alias : metadata.aliases) {
    aliases.push_back(
        {{"output", alias.output}, {"input", alias.input}, {"kind", alias_kind_name(alias.kind)}});
  }
  return {{"inputs", inputs},
          {"outputs", outputs},
          {"aliases", aliases},
          {"target_device", metadata.target_device},
          {"producer", metadata.producer}};
}

}  // namespace kvrt::format
