#include "kvrt/generation/tokenizer_model.h"

#include "kvrt/generation/tokenizer_bpe.h"
#include "kvrt/generation/tokenizer_unigram.h"

namespace kvrt::tok {

Result<std::unique_ptr<Model>> parse_model(const Json& json, const std::string& where) {
  if (!json.is_object()) return invalid_argument(where, ": expected an object");
  // Files written by old tokenizers versions may omit "type"; HF then tells the models
  // apart by their fields: BPE has merges, Unigram a list vocabulary.
  std::string type;
  if (const Json* field = optional_field(json, "type")) {
    if (!field->is_string()) return invalid_argument(where, ".type: expected a string");
    type = field->get<std::string>();
  } else if (optional_field(json, "merges") != nullptr) {
    type = "BPE";
  } else if (const Json* vocab = optional_field(json, "vocab"); vocab && vocab->is_array()) {
    type = "Unigram";
  } else {
    return not_supported(where, ".type: missing, and the model is neither BPE nor Unigram");
  }
  if (type == "BPE") {
    KVRT_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::parse(json, where));
    return std::unique_ptr<Model>(new BpeModel(std::move(bpe)));
  }
  if (type == "Unigram") {
    KVRT_ASSIGN_OR_RETURN(UnigramModel unigram, UnigramModel::parse(json, where));
    return std::unique_ptr<Model>(new UnigramModel(std::move(unigram)));
  }
  return not_supported(where, ".type: model '", type,
                       "' is not supported (supported: BPE, Unigram)");
}

}  // namespace kvrt::tok
