// Regular expressions for tokenizer.json patterns (Split pre-tokenizer, Replace
// normalizer and decoder). Patterns are written for Oniguruma in Hugging Face
// tokenizers; PCRE2 in UTF + UCP mode accepts the ones models ship (the GPT-2,
// Llama 3 and Qwen2 splitting regexes) with the same meaning.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"

namespace kvrt::tok {

// A byte range [begin, end) of a text.
struct Span {
  size_t begin;
  size_t end;
};

class Regex {
 public:
  // Compiles pattern; `where` names the JSON field in the error message.
  static Result<Regex> compile(std::string_view pattern, std::string_view where);

  // Successive non-overlapping matches in text (well-formed UTF-8), left to right.
  // After an empty match the search resumes one character later.
  Result<std::vector<Span>> find_all(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
  std::string where_;  // the JSON field, for match errors
};

// A tokenizer.json "pattern": {"String": "..."} matches literally, {"Regex": "..."}
// as a regular expression.
class Pattern {
 public:
  static Result<Pattern> literal(std::string text, std::string_view where);
  static Result<Pattern> regex(std::string_view pattern, std::string_view where);

  Result<std::vector<Span>> find_all(std::string_view text) const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

// The "pattern" member of a Split pre-tokenizer or a Replace normalizer/decoder.
Result<Pattern> parse_pattern(const Json& json, const std::string& where);

// Replaces every match of pattern in text by content.
Result<std::string> replace_all(const Pattern& pattern, std::string_view text,
                                std::string_view content);

}  // namespace kvrt::tok
