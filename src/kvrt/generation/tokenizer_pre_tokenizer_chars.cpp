// Pre-tokenizers that split on character classes, with the classes Hugging Face's Rust
// code uses: Rust regex's Unicode \w and \s (Whitespace), char::is_whitespace
// (WhitespaceSplit), ASCII or Unicode punctuation (Punctuation, BertPreTokenizer) and
// char::is_numeric (Digits). A predicate matches one character at a time, so Isolated
// yields each matching character alone and Contiguous joins runs of them.
#include <functional>

#include "kvrt/generation/tokenizer_split.h"
#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

using Ptr = std::unique_ptr<PreTokenizer>;
using CharPredicate = bool (*)(char32_t);

std::vector<Span> char_matches(std::string_view text, CharPredicate predicate) {
  std::vector<Span> spans;
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    if (predicate(utf8::decode(text, pos))) spans.push_back({begin, pos});
  }
  return spans;
}

bool is_punctuation(char32_t c) {
  return (c < 0x80 && ((c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
                       (c >= '{' && c <= '~'))) ||
         utf8::is_punctuation(c);
}

// One split step: a character class with a behavior.
struct CharSplit {
  CharPredicate predicate;
  Behavior behavior;
};

class CharClassPreTokenizer final : public PreTokenizer {
 public:
  explicit CharClassPreTokenizer(std::vector<CharSplit> steps) : steps_(std::move(steps)) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const CharSplit& step : steps_) {
      std::vector<Piece> out;
      for (const Piece& piece : pieces) {
        split_piece(piece, char_matches(piece.text, step.predicate), step.behavior, false, out);
      }
      pieces = std::move(out);
    }
    return Status();
  }

 private:
  std::vector<CharSplit> steps_;
};

// Whitespace keeps the matches of \w+|[^\w\s]+ (Rust regex, Unicode classes).
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  explicit WhitespacePreTokenizer(Regex regex) : regex_(std::move(regex)) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& piece : pieces) {
      KVRT_ASSIGN_OR_RETURN(std::vector<Span> matches, regex_.find_all(piece.text));
      split_piece(piece, matches, Behavior::kRemoved, /*invert=*/true, out);
    }
    pieces = std::move(out);
    return Status();
  }

 private:
  Regex regex_;
};

constexpr std::string_view kRustWord = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control})";

}  // namespace

std::optional<Result<Ptr>> parse_char_class_pre_tokenizer(const std::string& type, const Json& json,
                                                          const std::string& where) {
  if (type == "Whitespace") {
    const std::string pattern =
        "[" + std::string(kRustWord) + "]+|[^" + std::string(kRustWord) + R"(\p{White_Space}]+)";
    auto regex = Regex::compile(pattern, where);
    if (!regex.ok()) return Result<Ptr>(regex.status());
    return Result<Ptr>(Ptr(new WhitespacePreTokenizer(std::move(regex).value())));
  }
  if (type == "WhitespaceSplit") {
    return Result<Ptr>(
        Ptr(new CharClassPreTokenizer({{&utf8::is_whitespace, Behavior::kRemoved}})));
  }
  if (type == "Punctuation") {
    auto behavior = parse_behavior(json, where, Behavior::kIsolated);
    if (!behavior.ok()) return Result<Ptr>(behavior.status());
    return Result<Ptr>(Ptr(new CharClassPreTokenizer({{&is_punctuation, *behavior}})));
  }
  if (type == "Digits") {
    auto individual = bool_field(json, "individual_digits", false, where);
    if (!individual.ok()) return Result<Ptr>(individual.status());
    const Behavior behavior = *individual ? Behavior::kIsolated : Behavior::kContiguous;
    return Result<Ptr>(Ptr(new CharClassPreTokenizer({{&utf8::is_numeric, behavior}})));
  }
  if (type == "BertPreTokenizer") {
    return Result<Ptr>(Ptr(new CharClassPreTokenizer(
        {{&utf8::is_whitespace, Behavior::kRemoved}, {&is_punctuation, Behavior::kIsolated}})));
  }
  return std::nullopt;
}

}  // namespace kvrt::tok
