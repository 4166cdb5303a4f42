#include "kvrt/generation/tokenizer_normalizer.h"

#include <vector>

#include "kvrt/generation/tokenizer_precompiled.h"
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

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(utf8::NormalForm form) : form_(form) {}
  Result<std::string> normalize(std::string_view text) const override {
    return utf8::normalize(text, form_);
  }

 private:
  utf8::NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  Result<std::string> normalize(std::string_view text) const override {
    return utf8::lowercase(text);
  }
};

// Removes leading and/or trailing White_Space (Rust's char::is_whitespace).
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  Result<std::string> normalize(std::string_view text) const override {
    size_t begin = 0;
    size_t end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!utf8::is_whitespace(utf8::decode(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      size_t pos = begin;
      size_t last_kept = begin;
      while (pos < end) {
        if (!utf8::is_whitespace(utf8::decode(text, pos))) last_kept = pos;
      }
      end = last_kept;
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_;
  bool right_;
};

// Drops every combining mark (Mn, Mc, Me); it does not decompose first, which is why
// models put NFD before it.
class StripAccentsNormalizer final : public Normalizer {
 public:
  Result<std::string> normalize(std::string_view text) const override {
    std::string out;
    for (size_t pos = 0; pos < text.size();) {
      const size_t begin = pos;
      if (!utf8::is_mark(utf8::decode(text, pos))) out.append(text.substr(begin, pos - begin));
    }
    return out;
  }
};

// BERT's basic cleaning, in HF's order: clean text, space out CJK ideographs, strip
// accents (NFD, then drop Mn), lowercase.
class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese_chars, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        chinese_chars_(chinese_chars),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}
  Result<std::string> normalize(std::string_view input) const override {
    std::string text(input);
    if (clean_text_) {
      std::string out;
      for (size_t pos = 0; pos < text.size();) {
        const char32_t c = utf8::decode(text, pos);
        const bool tab_or_newline = c == '\t' || c == '\n' || c == '\r';
        if (c == 0 || c == utf8::kReplacementChar || (!tab_or_newline && utf8::is_other(c)))
          continue;
        if (utf8::is_whitespace(c)) {
          out += ' ';
        } else {
          utf8::append(out, c);
        }
      }
      text = std::move(out);
    }
    if (chinese_chars_) {
      std::string out;
      for (size_t pos = 0; pos < text.size();) {
        const char32_t c = utf8::decode(text, pos);
        const bool cjk = (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
                         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
                         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
                         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
        if (cjk) out += ' ';
        utf8::append(out, c);
        if (cjk) out += ' ';
      }
      text = std::move(out);
    }
    if (strip_accents_) {
      const std::string decomposed = utf8::normalize(text, utf8::NormalForm::kNfd);
      text.clear();
      for (size_t pos = 0; pos < decomposed.size();) {
        const size_t begin = pos;
        if (!utf8::is_nonspacing_mark(utf8::decode(decomposed, pos))) {
          text.append(decomposed, begin, pos - begin);
        }
      }
    }
    if (lowercase_) text = utf8::lowercase(text);
    return text;
  }

 private:
  bool clean_text_;
  bool chinese_chars_;
  bool strip_accents_;
  bool lowercase_;
};

class PrecompiledNormalizer final : public Normalizer {
 public:
  explicit PrecompiledNormalizer(PrecompiledCharsmap map) : map_(std::move(map)) {}
  Result<std::string> normalize(std::string_view text) const override {
    return map_.normalize(text);
  }

 private:
  PrecompiledCharsmap map_;
};

Result<std::unique_ptr<Normalizer>> parse_precompiled(const Json& json, const std::string& where) {
  const std::string path = field_path(where, "precompiled_charsmap");
  // HF fails to load an empty or missing map (its parser needs the header), so kvrt
  // refuses it too instead of guessing that no rule was meant.
  KVRT_ASSIGN_OR_RETURN(const Json* charsmap, required_field(json, "precompiled_charsmap", where));
  if (!charsmap->is_string()) return invalid_argument(path, ": expected a base64 string");
  KVRT_ASSIGN_OR_RETURN(std::string bytes, base64_decode(charsmap->get<std::string>(), path));
  KVRT_ASSIGN_OR_RETURN(PrecompiledCharsmap map, PrecompiledCharsmap::parse(bytes, path));
  return std::unique_ptr<Normalizer>(new PrecompiledNormalizer(std::move(map)));
}

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
  using Ptr = std::unique_ptr<Normalizer>;
  if (type == "NFC") return Ptr(new UnicodeNormalizer(utf8::NormalForm::kNfc));
  if (type == "NFD") return Ptr(new UnicodeNormalizer(utf8::NormalForm::kNfd));
  if (type == "NFKC") return Ptr(new UnicodeNormalizer(utf8::NormalForm::kNfkc));
  if (type == "NFKD") return Ptr(new UnicodeNormalizer(utf8::NormalForm::kNfkd));
  if (type == "Lowercase") return Ptr(new LowercaseNormalizer());
  if (type == "StripAccents") return Ptr(new StripAccentsNormalizer());
  if (type == "Strip") {
    KVRT_ASSIGN_OR_RETURN(bool left, bool_field(json, "strip_left", true, where));
    KVRT_ASSIGN_OR_RETURN(bool right, bool_field(json, "strip_right", true, where));
    return Ptr(new StripNormalizer(left, right));
  }
  if (type == "BertNormalizer") {
    KVRT_ASSIGN_OR_RETURN(bool clean_text, bool_field(json, "clean_text", true, where));
    KVRT_ASSIGN_OR_RETURN(bool chinese, bool_field(json, "handle_chinese_chars", true, where));
    KVRT_ASSIGN_OR_RETURN(bool lowercase, bool_field(json, "lowercase", true, where));
    // strip_accents null means "as lowercase" (HF's deserializer).
    KVRT_ASSIGN_OR_RETURN(bool strip_accents, bool_field(json, "strip_accents", lowercase, where));
    return Ptr(new BertNormalizer(clean_text, chinese, strip_accents, lowercase));
  }
  if (type == "Precompiled") return parse_precompiled(json, where);
  return not_supported(field_path(where, "type"), ": normalizer '", type,
                       "' is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, "
                       "NFKD, Lowercase, Strip, StripAccents, BertNormalizer, Precompiled)");
}

}  // namespace kvrt::tok
