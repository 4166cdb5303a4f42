// Parses template tokens into statements, with Jinja's operator precedence (lowest
// first): `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **,
// unary - +, then postfix . [] () and the filters | and tests `is` of the operand.
#pragma once

#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/jinja/ast.h"
#include "kvrt/jinja/lexer.h"

namespace kvrt::jinja {

// Statements Jinja has that this interpreter does not (include, extends, block, raw,
// do, with, ...) fail with kNotSupported naming the tag and its line; malformed
// templates fail with kInvalidArgument.
Result<Body> parse(const std::vector<Token>& tokens);

}  // namespace kvrt::jinja
