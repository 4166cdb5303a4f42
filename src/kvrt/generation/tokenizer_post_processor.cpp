#include "kvrt/generation/tokenizer_post_processor.h"

namespace kvrt::tok {
namespace {

Result<std::vector<int32_t>> special_token_ids(const Json& json, const std::string& name,
                                               const std::string& where) {
  const std::string path = field_path(where, "special_tokens");
  const Json* tokens = optional_field(json, "special_tokens");
  const Json* entry = tokens == nullptr ? nullptr : optional_field(*tokens, name);
  if (entry == nullptr) return invalid_argument(path, ": no entry for '", name, "'");
  KVRT_ASSIGN_OR_RETURN(const Json* ids, array_field(*entry, "ids", field_path(path, name)));
  std::vector<int32_t> out;
  for (const Json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return invalid_argument(field_path(path, name), ".ids: expected non-negative integers");
    }
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

Result<PostProcessor> parse_template(const Json& json, const std::string& where) {
  KVRT_ASSIGN_OR_RETURN(const Json* single, array_field(json, "single", where));
  PostProcessor result;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string path = index_path(field_path(where, "single"), i);
    const Json& item = (*single)[i];
    if (const Json* special = optional_field(item, "SpecialToken")) {
      KVRT_ASSIGN_OR_RETURN(std::string name, string_field(*special, "id", path + ".SpecialToken"));
      KVRT_ASSIGN_OR_RETURN(auto ids, special_token_ids(json, name, where));
      auto& target = seen_sequence ? result.suffix : result.prefix;
      target.insert(target.end(), ids.begin(), ids.end());
    } else if (const Json* sequence = optional_field(item, "Sequence")) {
      KVRT_ASSIGN_OR_RETURN(std::string name, string_field(*sequence, "id", path + ".Sequence"));
      if (name != "A" || seen_sequence) {
        return not_supported(path, ": a single-sequence template must hold $A exactly once");
      }
      seen_sequence = true;
    } else {
      return not_supported(path, ": expected a SpecialToken or Sequence item");
    }
  }
  if (!seen_sequence) return not_supported(field_path(where, "single"), ": template lacks $A");
  return result;
}

// RobertaProcessing / BertProcessing: "cls": [token, id] before, "sep" after.
Result<int32_t> pair_id(const Json& json, std::string_view key, const std::string& where) {
  KVRT_ASSIGN_OR_RETURN(const Json* pair, array_field(json, key, where));
  if (pair->size() != 2 || !(*pair)[1].is_number_integer() || (*pair)[1].get<int64_t>() < 0) {
    return invalid_argument(field_path(where, key), ": expected [token, id]");
  }
  return static_cast<int32_t>((*pair)[1].get<int64_t>());
}

}  // namespace

Result<PostProcessor> parse_post_processor(const Json& json, const std::string& where) {
  if (json.is_null()) return PostProcessor();
  KVRT_ASSIGN_OR_RETURN(std::string type, type_field(json, where));
  if (type == "TemplateProcessing") return parse_template(json, where);
  if (type == "ByteLevel") return PostProcessor();  // only trims offsets
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    KVRT_ASSIGN_OR_RETURN(int32_t cls, pair_id(json, "cls", where));
    KVRT_ASSIGN_OR_RETURN(int32_t sep, pair_id(json, "sep", where));
    return PostProcessor{{cls}, {sep}};
  }
  if (type == "Sequence") {
    // Each processor wraps the output of the previous one.
    KVRT_ASSIGN_OR_RETURN(const Json* list, array_field(json, "processors", where));
    PostProcessor result;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string path = index_path(field_path(where, "processors"), i);
      if ((*list)[i].is_null()) return invalid_argument(path, ": null processor");
      KVRT_ASSIGN_OR_RETURN(PostProcessor step, parse_post_processor((*list)[i], path));
      result.prefix.insert(result.prefix.begin(), step.prefix.begin(), step.prefix.end());
      result.suffix.insert(result.suffix.end(), step.suffix.begin(), step.suffix.end());
    }
    return result;
  }
  return not_supported(field_path(where, "type"), ": post-processor '", type,
                       "' is not supported (supported: TemplateProcessing, ByteLevel, "
                       "RobertaProcessing, BertProcessing, Sequence)");
}

}  // namespace kvrt::tok
