#define PCRE2_CODE_UNIT_WIDTH 8
#include "kvrt/generation/tokenizer_regex.h"

#include <pcre2.h>

#include "kvrt/generation/utf8.h"

namespace kvrt::tok {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Result<Regex> Regex::compile(std::string_view pattern, std::string_view where) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return not_supported(where, ": regex '", pattern, "' does not compile at offset ", error_offset,
                         ": ", reinterpret_cast<const char*>(message));
  }
  // JIT is an optimization only: a build of PCRE2 without it still matches.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  Regex regex;
  auto holder = std::make_shared<Code>();
  holder->code = code;
  regex.code_ = std::move(holder);
  regex.pattern_ = std::string(pattern);
  regex.where_ = std::string(where);
  return regex;
}

Result<std::vector<Span>> Regex::find_all(std::string_view text) const {
  std::vector<Span> spans;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  if (!match) return allocation_failed("regex match data");
  size_t start = 0;
  // The subject is checked for UTF-8 once; later calls skip the O(n) check.
  uint32_t options = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                               start, options, match.get(), nullptr);
    options = PCRE2_NO_UTF_CHECK;
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      // A pattern that backtracks past PCRE2's match limit on this text: the file's
      // pattern is at fault, so the error names its field (the caller adds the file).
      return invalid_argument(where_, ": regex '", pattern_, "' failed on a text of ", text.size(),
                              " bytes: ", reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    spans.push_back({begin, end});
    if (end > begin) {
      start = end;
    } else if (end < text.size()) {
      const int length = utf8::sequence_length(static_cast<unsigned char>(text[end]));
      start = end + static_cast<size_t>(length > 0 ? length : 1);
    } else {
      break;
    }
  }
  return spans;
}

Result<Pattern> Pattern::literal(std::string text, std::string_view where) {
  if (text.empty()) return invalid_argument(where, ": empty string pattern");
  Pattern pattern;
  pattern.literal_ = std::move(text);
  return pattern;
}

Result<Pattern> Pattern::regex(std::string_view text, std::string_view where) {
  KVRT_ASSIGN_OR_RETURN(Regex compiled, Regex::compile(text, where));
  Pattern pattern;
  pattern.regex_ = std::move(compiled);
  return pattern;
}

Result<std::vector<Span>> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<Span> spans;
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size())) {
    spans.push_back({pos, pos + literal_.size()});
  }
  return spans;
}

Result<std::string> replace_all(const Pattern& pattern, std::string_view text,
                                std::string_view content) {
  KVRT_ASSIGN_OR_RETURN(std::vector<Span> spans, pattern.find_all(text));
  if (spans.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t last = 0;
  for (const Span& span : spans) {
    out.append(text.substr(last, span.begin - last));
    out.append(content);
    last = span.end;
  }
  out.append(text.substr(last));
  return out;
}

Result<Pattern> parse_pattern(const Json& json, const std::string& where) {
  KVRT_ASSIGN_OR_RETURN(const Json* pattern, required_field(json, "pattern", where));
  const std::string path = field_path(where, "pattern");
  if (const Json* literal = optional_field(*pattern, "String")) {
    if (!literal->is_string()) return invalid_argument(path, ".String: expected a string");
    return Pattern::literal(literal->get<std::string>(), path);
  }
  if (const Json* regex = optional_field(*pattern, "Regex")) {
    if (!regex->is_string()) return invalid_argument(path, ".Regex: expected a string");
    return Pattern::regex(regex->get<std::string>(), path);
  }
  return not_supported(path, ": expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace kvrt::tok
