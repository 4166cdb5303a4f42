// Splits template source into text and the tokens inside {{ }} and {% %} tags, applying
// whitespace control as transformers configures Jinja: trim_blocks (the newline after
// a block or comment tag is dropped), lstrip_blocks (spaces and tabs before a block or
// comment tag at the start of a line are dropped), '-' on either side of a tag strips
// all whitespace on that side, '+' keeps it, and one trailing newline of the template
// is removed (keep_trailing_newline=False). Comments produce no tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt::jinja {

enum class TokenKind {
  kText,        // template text, already whitespace-processed
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded value
  kInt,
  kFloat,
  kOperator,  // text holds the operator: "+", "//", "(", "|" ...
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;
};

Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace kvrt::jinja
