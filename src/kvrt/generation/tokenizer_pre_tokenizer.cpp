#include "kvrt/generation/tokenizer_pre_tokenizer.h"

#include <algorithm>

#include "kvrt/generation/tokenizer_byte_level.h"
#include "kvrt/generation/tokenizer_regex.h"
#include "kvrt/generation/tokenizer_split.h"

namespace kvrt::tok {
namespace {

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) KVRT_RETURN_IF_ERROR(step->pre_tokenize(pieces));
    return Status();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& piece : pieces) {
      KVRT_ASSIGN_OR_RETURN(std::vector<Span> matches, pattern_.find_all(piece.text));
      split_piece(piece, matches, behavior_, invert_, out);
    }
    pieces = std::move(out);
    return Status();
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's splitting regex, which ByteLevel uses when use_regex is true.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::optional<Pattern> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> split;
    for (Piece& piece : pieces) {
      if (add_prefix_space_ && !piece.text.empty() && piece.text.front() != ' ') {
        piece.text = " " + piece.text;  // not insert(): GCC 12 -Wrestrict false positive
      }
      if (regex_) {
        KVRT_ASSIGN_OR_RETURN(std::vector<Span> matches, regex_->find_all(piece.text));
        split_piece(piece, matches, Behavior::kIsolated, false, split);
      } else {
        split.push_back(std::move(piece));
      }
    }
    for (Piece& piece : split) piece.text = byte_level_encode(piece.text);
    pieces = std::move(split);
    return Status();
  }

 private:
  bool add_prefix_space_;
  std::optional<Pattern> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split, Pattern pattern)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        pattern_(std::move(pattern)) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (Piece& piece : pieces) {
      std::string text;
      for (char c : piece.text) {
        if (c == ' ') {
          text += replacement_;
        } else {
          text += c;
        }
      }
      const bool has_prefix = text.starts_with(replacement_);
      if (!has_prefix && (scheme_ == PrependScheme::kAlways ||
                          (scheme_ == PrependScheme::kFirst && piece.at_origin))) {
        text = replacement_ + text;
      }
      Piece replaced{std::move(text), piece.at_origin};
      if (!split_) {
        out.push_back(std::move(replaced));
        continue;
      }
      KVRT_ASSIGN_OR_RETURN(std::vector<Span> matches, pattern_.find_all(replaced.text));
      split_piece(replaced, matches, Behavior::kMergedWithNext, false, out);
    }
    pieces = std::move(out);
    return Status();
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  Pattern pattern_;
};

Result<PrependScheme> parse_prepend_scheme(const Json& json, const std::string& where) {
  KVRT_ASSIGN_OR_RETURN(std::optional<std::string> name,
                        optional_string_field(json, "prepend_scheme", where));
  KVRT_ASSIGN_OR_RETURN(bool add_prefix_space, bool_field(json, "add_prefix_space", true, where));
  // Files written before prepend_scheme existed only carry add_prefix_space.
  if (!add_prefix_space) return PrependScheme::kNever;
  if (!name || *name == "always") return PrependScheme::kAlways;
  if (*name == "first") return PrependScheme::kFirst;
  if (*name == "never") return PrependScheme::kNever;
  return not_supported(field_path(where, "prepend_scheme"), ": unknown scheme '", *name, "'");
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& json,
                                                          const std::string& where) {
  using Ptr = std::unique_ptr<PreTokenizer>;
  if (json.is_null()) return Ptr();
  KVRT_ASSIGN_OR_RETURN(std::string type, type_field(json, where));
  if (type == "Sequence") {
    KVRT_ASSIGN_OR_RETURN(const Json* list, array_field(json, "pretokenizers", where));
    std::vector<Ptr> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string path = index_path(field_path(where, "pretokenizers"), i);
      if ((*list)[i].is_null()) return invalid_argument(path, ": null pre-tokenizer");
      KVRT_ASSIGN_OR_RETURN(Ptr step, parse_pre_tokenizer((*list)[i], path));
      steps.push_back(std::move(step));
    }
    return Ptr(new SequencePreTokenizer(std::move(steps)));
  }
  if (type == "Split") {
    KVRT_ASSIGN_OR_RETURN(Pattern pattern, parse_pattern(json, where));
    KVRT_ASSIGN_OR_RETURN(Behavior behavior, parse_behavior(json, where));
    KVRT_ASSIGN_OR_RETURN(bool invert, bool_field(json, "invert", false, where));
    return Ptr(new SplitPreTokenizer(std::move(pattern), behavior, invert));
  }
  if (type == "ByteLevel") {
    KVRT_ASSIGN_OR_RETURN(bool add_prefix_space, bool_field(json, "add_prefix_space", true, where));
    KVRT_ASSIGN_OR_RETURN(bool use_regex, bool_field(json, "use_regex", true, where));
    std::optional<Pattern> regex;
    if (use_regex) {
      KVRT_ASSIGN_OR_RETURN(regex, Pattern::regex(kGpt2Regex, where));
    }
    return Ptr(new ByteLevelPreTokenizer(add_prefix_space, std::move(regex)));
  }
  if (type == "Metaspace") {
    KVRT_ASSIGN_OR_RETURN(std::string replacement, char_field(json, "replacement", where));
    KVRT_ASSIGN_OR_RETURN(PrependScheme scheme, parse_prepend_scheme(json, where));
    KVRT_ASSIGN_OR_RETURN(bool split, bool_field(json, "split", true, where));
    KVRT_ASSIGN_OR_RETURN(Pattern pattern, Pattern::literal(replacement, where));
    return Ptr(new MetaspacePreTokenizer(replacement, scheme, split, std::move(pattern)));
  }
  if (auto by_class = parse_char_class_pre_tokenizer(type, json, where))
    return *std::move(by_class);
  return not_supported(field_path(where, "type"), ": pre-tokenizer '", type,
                       "' is not supported (supported: Sequence, Split, ByteLevel, Metaspace, "
                       "Whitespace, WhitespaceSplit, Punctuation, Digits, BertPreTokenizer)");
}

}  // namespace kvrt::tok
