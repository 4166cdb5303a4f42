#include "kvrt/generation/tokenizer_normalizer.h"

#include <vector>

#include "kvrt/generation/tokenizer_regex.h"
#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  Result<std::string> normalize(std::string_view text) const override {
    std::string current(text);
    for (const auto& step : steps_) {
      KVRT_ASSIGN_OR_RETURN(current, step->normalize(current));
    }
    return current;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Prepends only to non-empty text, as Hugging Face does.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  Result<std::string> normalize(std::string_view text) const override {
    if (text.empty()) return std::string();
    return prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  Result<std::string> normalize(std::string_view text) const override {
    return replace_all(pattern_, text, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class NfcNormalizer final : public Normalizer {
 public:
  Result<std::string> normalize(std::string_view text) const override { return utf8::nfc(text); }
};

}  // namespace

Result<std::unique_ptr<Normalizer>> parse_normalizer(const Json& json, const std::string& where) {
  if (json.is_null()) return std::unique_ptr<Normalizer>();
  KVRT_ASSIGN_OR_RETURN(std::string type, type_field(json, where));
  if (type == "Sequence") {
    KVRT_ASSIGN_OR_RETURN(const Json* list, array_field(json, "normalizers", where));
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string path = index_path(field_path(where, "normalizers"), i);
      if ((*list)[i].is_null()) return invalid_argument(path, ": null normalizer");
      KVRT_ASSIGN_OR_RETURN(auto step, parse_normalizer((*list)[i], path));
      steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  if (type == "Prepend") {
    KVRT_ASSIGN_OR_RETURN(std::string prefix, string_field(json, "prepend", where));
    return std::unique_ptr<Normalizer>(new PrependNormalizer(std::move(prefix)));
  }
  if (type == "Replace") {
    KVRT_ASSIGN_OR_RETURN(Pattern pattern, parse_pattern(json, where));
    KVRT_ASSIGN_OR_RETURN(std::string content, string_field(json, "content", where));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(pattern), content));
  }
  if (type == "NFC") return std::unique_ptr<Normalizer>(new NfcNormalizer());
  return not_supported(field_path(where, "type"), ": normalizer '", type,
                       "' is not supported (supported: Sequence, Prepend, Replace, NFC)");
}

}  // namespace kvrt::tok
