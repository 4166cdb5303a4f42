// Splitting a pre-tokenizer piece at delimiter matches, with Hugging Face's
// SplitDelimiterBehavior (NormalizedString::split), shared by the pre-tokenizers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"
#include "kvrt/generation/tokenizer_pre_tokenizer.h"
#include "kvrt/generation/tokenizer_regex.h"

namespace kvrt::tok {

// What happens to the matched delimiters when a piece is split.
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits one piece at the spans of `matches` (sorted, non-overlapping) and appends the
// non-empty results to out. invert swaps the roles of matches and the text between.
void split_piece(const Piece& piece, const std::vector<Span>& matches, Behavior behavior,
                 bool invert, std::vector<Piece>& out);

// The "behavior" member; `fallback` when it is missing (nullopt: required).
Result<Behavior> parse_behavior(const Json& json, const std::string& where,
                                std::optional<Behavior> fallback = std::nullopt);

// The pre-tokenizers that split on character classes (Whitespace, WhitespaceSplit,
// Punctuation, Digits, BertPreTokenizer), or nullopt when `type` is none of them.
std::optional<Result<std::unique_ptr<PreTokenizer>>> parse_char_class_pre_tokenizer(
    const std::string& type, const Json& json, const std::string& where);

}  // namespace kvrt::tok
