#include "kvrt/generation/tokenizer_added_tokens.h"

#include <algorithm>

#include "kvrt/core/log.h"
#include "kvrt/generation/tokenizer_regex.h"
#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

// Rust regex's \w (Alphabetic, marks, decimal digits, connector punctuation and
// join controls), which HF uses for single_word. PCRE2's own \w is narrower.
bool is_word_char(char32_t cp) {
  static const Result<Regex> word =
      Regex::compile(R"(^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]$)", "single_word");
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  if (!word.ok()) return false;
  std::string text;
  utf8::append(text, cp);
  auto spans = word->find_all(text);
  return spans.ok() && !spans->empty();
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t pos = text.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return is_word_char(utf8::peek(text, pos));
}

bool starts_with_word(std::string_view text) {
  return !text.empty() && is_word_char(utf8::peek(text, 0));
}

// Start of the whitespace run that ends text[from..end) (end when there is none).
size_t trailing_space_start(std::string_view text, size_t from, size_t end) {
  size_t run_start = end;
  for (size_t pos = from; pos < end;) {
    const size_t begin = pos;
    if (utf8::is_whitespace(utf8::decode(text, pos))) {
      if (run_start == end) run_start = begin;
    } else {
      run_start = end;
    }
  }
  return run_start;
}

size_t leading_space_end(std::string_view text, size_t from) {
  size_t pos = from;
  while (pos < text.size()) {
    size_t next = pos;
    if (!utf8::is_whitespace(utf8::decode(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

Result<AddedTokens> AddedTokens::parse(const Json& list, const Normalizer* normalizer,
                                       const Model& model, const std::string& where) {
  AddedTokens added;
  if (list.is_null()) return added;
  if (!list.is_array()) return invalid_argument(where, ": expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = index_path(where, i);
    const Json& entry = list[i];
    AddedToken token;
    KVRT_ASSIGN_OR_RETURN(int64_t id, int_field(entry, "id", path));
    if (id < 0 || id > INT32_MAX - 1) return invalid_argument(path, ".id: out of range");
    KVRT_ASSIGN_OR_RETURN(token.content, string_field(entry, "content", path));
    KVRT_ASSIGN_OR_RETURN(token.special, bool_field(entry, "special", false, path));
    KVRT_ASSIGN_OR_RETURN(token.single_word, bool_field(entry, "single_word", false, path));
    KVRT_ASSIGN_OR_RETURN(token.lstrip, bool_field(entry, "lstrip", false, path));
    KVRT_ASSIGN_OR_RETURN(token.rstrip, bool_field(entry, "rstrip", false, path));
    KVRT_ASSIGN_OR_RETURN(token.normalized, bool_field(entry, "normalized", !token.special, path));
    if (!utf8::is_valid(token.content)) return invalid_argument(path, ".content: not UTF-8");
    // HF skips an empty token silently, leaving its id without text; refused instead.
    if (token.content.empty()) return invalid_argument(path, ".content: empty");
    if (auto known = added.token_to_id(token.content)) {
      token.id = *known;
    } else if (auto in_model = model.token_to_id(token.content)) {
      token.id = *in_model;
    } else {
      const auto vocab_count = static_cast<int32_t>(model.vocab_count());
      token.id = added.max_id_ >= vocab_count || vocab_count == 0 ? added.max_id_ + 1 : vocab_count;
    }
    if (token.id != id) {
      log(LogLevel::kWarn, where, ": token '", token.content, "' has id ", id,
          " in the file but id ", token.id, " by Hugging Face's numbering, which kvrt uses");
    }
    added.max_id_ = std::max(added.max_id_, token.id);
    added.by_id_[token.id] = added.tokens_.size();
    added.by_content_[token.content] = token.id;
    added.tokens_.push_back(token);

    Matcher& matcher = token.normalized ? added.normalized_ : added.raw_;
    std::string pattern = token.content;
    if (token.normalized && normalizer != nullptr) {
      KVRT_ASSIGN_OR_RETURN(pattern, normalizer->normalize(token.content));
    }
    if (pattern.empty()) continue;
    matcher.by_first_byte[static_cast<unsigned char>(pattern[0])].push_back(
        static_cast<uint32_t>(matcher.patterns.size()));
    matcher.patterns.push_back(std::move(pattern));
    matcher.token_index.push_back(added.tokens_.size() - 1);
  }
  return added;
}

std::vector<AddedTokens::Match> AddedTokens::find_matches(std::string_view text,
                                                          const Matcher& matcher) const {
  std::vector<Match> matches;
  size_t start_offset = 0;  // end of the previous accepted match
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& candidates = matcher.by_first_byte[static_cast<unsigned char>(text[pos])];
    // Leftmost-longest: the longest pattern that starts at the first matching position.
    size_t best = SIZE_MAX;
    for (uint32_t i : candidates) {
      const std::string& p = matcher.patterns[i];
      if (text.compare(pos, p.size(), p) == 0 &&
          (best == SIZE_MAX || p.size() > matcher.patterns[best].size())) {
        best = i;
      }
    }
    if (best == SIZE_MAX) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[matcher.token_index[best]];
    size_t start = pos;
    size_t stop = pos + matcher.patterns[best].size();
    pos = stop;  // the scan resumes after the raw match, accepted or not
    if (token.single_word) {
      const bool space_before = start == 0 || !ends_with_word(text.substr(0, start));
      const bool space_after = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (start < start_offset) continue;  // overlaps a previous token's stripped spaces
    if (token.lstrip)
      start = std::max(trailing_space_start(text, start_offset, start), start_offset);
    if (token.rstrip) stop = leading_space_end(text, stop);
    matches.push_back({start, stop, token.id});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  return matches;
}

Result<std::vector<Segment>> AddedTokens::split(std::string_view text,
                                                const Normalizer* normalizer) const {
  std::vector<Segment> segments;
  // Normalizes the raw text [begin, end) and splits it on normalized tokens.
  auto add_text = [&](size_t begin, size_t end) -> Status {
    std::string normalized(text.substr(begin, end - begin));
    if (normalizer != nullptr) {
      KVRT_ASSIGN_OR_RETURN(normalized, normalizer->normalize(normalized));
    }
    size_t last = 0;
    for (const Match& m : find_matches(normalized, normalized_)) {
      if (m.begin > last) {
        segments.push_back({normalized.substr(last, m.begin - last), -1, begin == 0 && last == 0});
      }
      segments.push_back({normalized.substr(m.begin, m.end - m.begin), m.id, false});
      last = m.end;
    }
    if (last < normalized.size()) {
      segments.push_back({normalized.substr(last), -1, begin == 0 && last == 0});
    }
    return Status();
  };
  size_t last = 0;
  for (const Match& m : find_matches(text, raw_)) {
    if (m.begin > last) KVRT_RETURN_IF_ERROR(add_text(last, m.begin));
    segments.push_back({std::string(text.substr(m.begin, m.end - m.begin)), m.id, false});
    last = m.end;
  }
  if (last < text.size()) KVRT_RETURN_IF_ERROR(add_text(last, text.size()));
  return segments;
}

const AddedToken* AddedTokens::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedTokens::token_to_id(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kvrt::tok
