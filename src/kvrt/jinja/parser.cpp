#include "kvrt/jinja/parser.h"

#include <cstdlib>
#include <initializer_list>
#include <string_view>

namespace kvrt::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Result<Body> parse_template() {
    Body body;
    std::string end_tag;
    KVRT_RETURN_IF_ERROR(parse_body({}, body, end_tag));
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    const size_t i = pos_ + ahead;
    return tokens_[i < tokens_.size() ? i : tokens_.size() - 1];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEnd:
        return "end of template";
      case TokenKind::kBlockEnd:
        return "'%}'";
      case TokenKind::kVarEnd:
        return "'}}'";
      case TokenKind::kText:
        return "template text";
      case TokenKind::kString:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  Status unexpected(std::string_view expected) const {
    return invalid_argument("line ", peek().line, ": expected ", expected, ", got ",
                            describe(peek()));
  }
  Status expect_op(std::string_view op) {
    if (skip_op(op)) return Status();
    std::string quoted = "'";
    quoted.append(op).append("'");
    return unexpected(quoted);
  }
  Status expect_block_end() {
    if (peek().kind != TokenKind::kBlockEnd) return unexpected("'%}'");
    next();
    return Status();
  }
  Result<std::string> expect_name() {
    if (peek().kind != TokenKind::kName) return unexpected("a name");
    return next().text;
  }

  static ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Parses statements until a block tag named in `stops`; leaves the position after
  // that tag's name and reports it in `end_tag`.
  Status parse_body(std::initializer_list<std::string_view> stops, Body& body,
                    std::string& end_tag) {
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEnd) {
        if (stops.size() == 0) return Status();
        return invalid_argument("line ", t.line, ": missing '{% ", *stops.begin(), " %}'");
      }
      if (t.kind == TokenKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = t.line;
        s->text = next().text;
        body.push_back(std::move(s));
        continue;
      }
      if (t.kind == TokenKind::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = t.line;
        KVRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(true));
        if (peek().kind != TokenKind::kVarEnd) return unexpected("'}}'");
        next();
        body.push_back(std::move(s));
        continue;
      }
      if (t.kind != TokenKind::kBlockBegin) return unexpected("template text or a tag");
      next();
      if (peek().kind != TokenKind::kName) return unexpected("a tag name");
      const std::string name = peek().text;
      for (std::string_view stop : stops) {
        if (name == stop) {
          next();
          end_tag = name;
          return Status();
        }
      }
      KVRT_RETURN_IF_ERROR(parse_statement(body));
    }
  }

  Status parse_statement(Body& body) {
    const Token& t = next();
    const std::string& tag = t.text;
    auto s = std::make_unique<Stmt>();
    s->line = t.line;
    std::string end;
    if (tag == "if") {
      s->kind = Stmt::Kind::kIf;
      while (true) {
        KVRT_ASSIGN_OR_RETURN(ExprPtr cond, parse_tuple(false));
        KVRT_RETURN_IF_ERROR(expect_block_end());
        Body branch;
        KVRT_RETURN_IF_ERROR(parse_body({"endif", "elif", "else"}, branch, end));
        s->branches.emplace_back(std::move(cond), std::move(branch));
        if (end != "elif") break;
      }
      if (end == "else") {
        KVRT_RETURN_IF_ERROR(expect_block_end());
        KVRT_RETURN_IF_ERROR(parse_body({"endif"}, s->else_body, end));
      }
    } else if (tag == "for") {
      s->kind = Stmt::Kind::kFor;
      KVRT_RETURN_IF_ERROR(parse_targets(s->targets));
      if (!skip_name("in")) return unexpected("'in'");
      KVRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(false));
      if (skip_name("if")) {
        KVRT_ASSIGN_OR_RETURN(s->cond, parse_expression(true));
      }
      if (is_name("recursive")) {
        return not_supported("line ", peek().line, ": recursive for loops are not supported");
      }
      KVRT_RETURN_IF_ERROR(expect_block_end());
      KVRT_RETURN_IF_ERROR(parse_body({"endfor", "else"}, s->body, end));
      if (end == "else") {
        KVRT_RETURN_IF_ERROR(expect_block_end());
        KVRT_RETURN_IF_ERROR(parse_body({"endfor"}, s->else_body, end));
      }
    } else if (tag == "set") {
      KVRT_RETURN_IF_ERROR(parse_targets(s->targets));
      if (s->targets.size() == 1 && skip_op(".")) {
        KVRT_ASSIGN_OR_RETURN(s->attribute, expect_name());
      }
      if (skip_op("=")) {
        s->kind = Stmt::Kind::kSet;
        KVRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(true));
      } else {
        s->kind = Stmt::Kind::kSetBlock;
        if (s->targets.size() != 1 || !s->attribute.empty()) return unexpected("'='");
        KVRT_RETURN_IF_ERROR(expect_block_end());
        KVRT_RETURN_IF_ERROR(parse_body({"endset"}, s->body, end));
      }
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::kMacro;
      KVRT_ASSIGN_OR_RETURN(s->text, expect_name());
      KVRT_RETURN_IF_ERROR(parse_params(s->params));
      KVRT_RETURN_IF_ERROR(expect_block_end());
      KVRT_RETURN_IF_ERROR(parse_body({"endmacro"}, s->body, end));
    } else if (tag == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (is_op("(")) KVRT_RETURN_IF_ERROR(parse_params(s->params));
      KVRT_ASSIGN_OR_RETURN(s->expr, parse_expression(true));
      if (s->expr->kind != Expr::Kind::kCall) return unexpected("a macro call");
      KVRT_RETURN_IF_ERROR(expect_block_end());
      KVRT_RETURN_IF_ERROR(parse_body({"endcall"}, s->body, end));
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      ExprPtr chain;
      do {
        KVRT_ASSIGN_OR_RETURN(chain, parse_filter(std::move(chain)));
      } while (skip_op("|"));
      s->expr = std::move(chain);
      KVRT_RETURN_IF_ERROR(expect_block_end());
      KVRT_RETURN_IF_ERROR(parse_body({"endfilter"}, s->body, end));
    } else if (tag == "generation") {
      // transformers' {% generation %} marks assistant text for masks; it renders as is.
      s->kind = Stmt::Kind::kIf;
      KVRT_RETURN_IF_ERROR(expect_block_end());
      Body inner;
      KVRT_RETURN_IF_ERROR(parse_body({"endgeneration"}, inner, end));
      auto yes = make(Expr::Kind::kLiteral, t.line);
      yes->literal = Value(true);
      s->branches.emplace_back(std::move(yes), std::move(inner));
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    } else if (tag == "elif" || tag == "else" || tag.rfind("end", 0) == 0) {
      return invalid_argument("line ", t.line, ": unexpected '{% ", tag, " %}'");
    } else {
      return not_supported("line ", t.line, ": the '", tag, "' tag is not supported");
    }
    KVRT_RETURN_IF_ERROR(expect_block_end());
    body.push_back(std::move(s));
    return Status();
  }

  Status parse_targets(std::vector<std::string>& targets) {
    const bool paren = skip_op("(");
    do {
      KVRT_ASSIGN_OR_RETURN(std::string name, expect_name());
      targets.push_back(std::move(name));
    } while (skip_op(","));
    if (paren) KVRT_RETURN_IF_ERROR(expect_op(")"));
    return Status();
  }

  Status parse_params(Keywords& params) {
    KVRT_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (!params.empty()) KVRT_RETURN_IF_ERROR(expect_op(","));
      KVRT_ASSIGN_OR_RETURN(std::string name, expect_name());
      ExprPtr fallback;
      if (skip_op("=")) {
        KVRT_ASSIGN_OR_RETURN(fallback, parse_expression(true));
      }
      params.emplace_back(std::move(name), std::move(fallback));
    }
    next();
    return Status();
  }

  // Expressions separated by commas become a tuple (a list here).
  Result<ExprPtr> parse_tuple(bool with_condexpr) {
    const int line = peek().line;
    KVRT_ASSIGN_OR_RETURN(ExprPtr first, parse_expression(with_condexpr));
    if (!is_op(",")) return first;
    auto list = make(Expr::Kind::kList, line);
    list->children.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().kind == TokenKind::kBlockEnd || peek().kind == TokenKind::kVarEnd) break;
      KVRT_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(with_condexpr));
      list->children.push_back(std::move(item));
    }
    return list;
  }

  Result<ExprPtr> parse_expression(bool with_condexpr) {
    KVRT_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
    while (with_condexpr && is_name("if")) {
      auto cond = make(Expr::Kind::kCondExpr, next().line);
      KVRT_ASSIGN_OR_RETURN(ExprPtr test, parse_or());
      ExprPtr otherwise;
      if (skip_name("else")) {
        KVRT_ASSIGN_OR_RETURN(otherwise, parse_expression(true));
      }
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(expr));
      cond->children.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }

  template <typename Next>
  Result<ExprPtr> parse_binary(std::initializer_list<std::string_view> ops, bool names,
                               Next next_level) {
    KVRT_ASSIGN_OR_RETURN(ExprPtr left, next_level());
    while (true) {
      std::string op;
      for (std::string_view candidate : ops) {
        if (names ? is_name(candidate) : is_op(candidate)) op = candidate;
      }
      if (op.empty()) return left;
      auto bin = make(Expr::Kind::kBinary, next().line);
      KVRT_ASSIGN_OR_RETURN(ExprPtr right, next_level());
      bin->name = op;
      bin->children.push_back(std::move(left));
      bin->children.push_back(std::move(right));
      left = std::move(bin);
    }
  }

  Result<ExprPtr> parse_or() {
    return parse_binary({"or"}, true, [this] { return parse_and(); });
  }
  Result<ExprPtr> parse_and() {
    return parse_binary({"and"}, true, [this] { return parse_not(); });
  }
  Result<ExprPtr> parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::kUnary, next().line);
      e->name = "not";
      KVRT_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
      e->children.push_back(std::move(operand));
      return e;
    }
    return parse_compare();
  }
  Result<ExprPtr> parse_compare() {
    const int line = peek().line;
    KVRT_ASSIGN_OR_RETURN(ExprPtr first, parse_math1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      for (std::string_view candidate : {"==", "!=", "<", ">", "<=", ">="}) {
        if (is_op(candidate)) op = candidate;
      }
      if (!op.empty()) {
        next();
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::kCompare, line);
        cmp->children.push_back(std::move(first));
      }
      KVRT_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
      cmp->ops.push_back(op);
      cmp->children.push_back(std::move(operand));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  Result<ExprPtr> parse_math1() {
    return parse_binary({"+", "-"}, false, [this] { return parse_concat(); });
  }
  Result<ExprPtr> parse_concat() {
    return parse_binary({"~"}, false, [this] { return parse_math2(); });
  }
  Result<ExprPtr> parse_math2() {
    return parse_binary({"*", "/", "//", "%"}, false, [this] { return parse_pow(); });
  }
  Result<ExprPtr> parse_pow() {
    return parse_binary({"**"}, false, [this] { return parse_unary(true); });
  }

  Result<ExprPtr> parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(Expr::Kind::kUnary, peek().line);
      node->name = next().text;
      KVRT_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
      node->children.push_back(std::move(operand));
    } else {
      KVRT_ASSIGN_OR_RETURN(node, parse_primary());
    }
    KVRT_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
    if (with_filter) {
      KVRT_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kName: {
        next();
        auto e = make(Expr::Kind::kLiteral, t.line);
        if (t.text == "true" || t.text == "True") {
          e->literal = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = Value::none();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case TokenKind::kString: {
        std::string value;
        while (peek().kind == TokenKind::kString) value += next().text;  // 'a' 'b' == 'ab'
        auto e = make(Expr::Kind::kLiteral, t.line);
        e->literal = Value(std::move(value));
        return e;
      }
      case TokenKind::kInt: {
        next();
        auto e = make(Expr::Kind::kLiteral, t.line);
        e->literal = Value(static_cast<int64_t>(std::strtoll(t.text.c_str(), nullptr, 10)));
        return e;
      }
      case TokenKind::kFloat: {
        next();
        auto e = make(Expr::Kind::kLiteral, t.line);
        e->literal = Value(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      case TokenKind::kOperator:
        if (t.text == "(") {
          next();
          if (skip_op(")")) return make(Expr::Kind::kList, t.line);
          KVRT_ASSIGN_OR_RETURN(ExprPtr inner, parse_tuple(true));
          KVRT_RETURN_IF_ERROR(expect_op(")"));
          return inner;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    return unexpected("an expression");
  }

  Result<ExprPtr> parse_list() {
    auto list = make(Expr::Kind::kList, next().line);
    while (!is_op("]")) {
      if (!list->children.empty()) {
        KVRT_RETURN_IF_ERROR(expect_op(","));
        if (is_op("]")) break;
      }
      KVRT_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(true));
      list->children.push_back(std::move(item));
    }
    next();
    return list;
  }

  Result<ExprPtr> parse_dict() {
    auto dict = make(Expr::Kind::kDict, next().line);
    while (!is_op("}")) {
      if (!dict->children.empty()) {
        KVRT_RETURN_IF_ERROR(expect_op(","));
        if (is_op("}")) break;
      }
      KVRT_ASSIGN_OR_RETURN(ExprPtr key, parse_expression(true));
      KVRT_RETURN_IF_ERROR(expect_op(":"));
      KVRT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      dict->children.push_back(std::move(key));
      dict->children.push_back(std::move(value));
    }
    next();
    return dict;
  }

  Result<ExprPtr> parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const int line = next().line;
        if (peek().kind == TokenKind::kInt) {
          auto e = make(Expr::Kind::kGetItem, line);
          auto index = make(Expr::Kind::kLiteral, line);
          index->literal =
              Value(static_cast<int64_t>(std::strtoll(next().text.c_str(), nullptr, 10)));
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(index));
          node = std::move(e);
          continue;
        }
        auto e = make(Expr::Kind::kGetAttr, line);
        KVRT_ASSIGN_OR_RETURN(e->name, expect_name());
        e->children.push_back(std::move(node));
        node = std::move(e);
      } else if (is_op("[")) {
        KVRT_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
      } else if (is_op("(")) {
        KVRT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr target) {
    const int line = next().line;
    std::vector<ExprPtr> parts;  // start, stop, step
    bool slice = false;
    while (true) {
      if (is_op(":") || is_op("]")) {
        parts.push_back(nullptr);
      } else {
        KVRT_ASSIGN_OR_RETURN(ExprPtr part, parse_expression(true));
        parts.push_back(std::move(part));
      }
      if (skip_op("]")) break;
      KVRT_RETURN_IF_ERROR(expect_op(":"));
      slice = true;
      if (parts.size() == 3) return unexpected("']'");
    }
    auto e = make(slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, line);
    e->children.push_back(std::move(target));
    if (!slice && !parts[0]) return invalid_argument("line ", line, ": empty subscript");
    for (auto& part : parts) e->children.push_back(std::move(part));
    while (slice && e->children.size() < 4) e->children.push_back(nullptr);
    return e;
  }

  Status parse_args(Expr& call) {
    KVRT_RETURN_IF_ERROR(expect_op("("));
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        KVRT_RETURN_IF_ERROR(expect_op(","));
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) {
        return not_supported("line ", peek().line, ": *args and **kwargs are not supported");
      }
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string name = next().text;
        next();
        KVRT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
        call.keywords.emplace_back(std::move(name), std::move(value));
        continue;
      }
      if (!call.keywords.empty()) {
        return invalid_argument("line ", peek().line, ": positional argument after keyword");
      }
      KVRT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      call.children.push_back(std::move(value));
    }
    next();
    return Status();
  }

  Result<ExprPtr> parse_call(ExprPtr callee) {
    auto call = make(Expr::Kind::kCall, peek().line);
    call->children.push_back(std::move(callee));
    KVRT_RETURN_IF_ERROR(parse_args(*call));
    return call;
  }

  Result<ExprPtr> parse_filter(ExprPtr operand) {
    auto f = make(Expr::Kind::kFilter, peek().line);
    KVRT_ASSIGN_OR_RETURN(f->name, expect_name());
    f->children.push_back(std::move(operand));
    if (is_op("(")) KVRT_RETURN_IF_ERROR(parse_args(*f));
    return f;
  }

  Result<ExprPtr> parse_filter_expr(ExprPtr node) {
    while (true) {
      if (skip_op("|")) {
        KVRT_ASSIGN_OR_RETURN(node, parse_filter(std::move(node)));
      } else if (is_name("is")) {
        auto test = make(Expr::Kind::kTest, next().line);
        test->negated = skip_name("not");
        KVRT_ASSIGN_OR_RETURN(test->name, expect_name());
        test->children.push_back(std::move(node));
        if (is_op("(")) {
          KVRT_RETURN_IF_ERROR(parse_args(*test));
        } else if (takes_bare_argument()) {
          KVRT_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
          KVRT_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
          test->children.push_back(std::move(arg));
        }
        node = std::move(test);
      } else if (is_op("(")) {
        KVRT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  // `x is divisibleby 3`: a test takes one argument without parentheses.
  bool takes_bare_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::kName) {
      return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if" &&
             t.text != "in" && t.text != "not" && t.text != "is";
    }
    return t.kind == TokenKind::kString || t.kind == TokenKind::kInt ||
           t.kind == TokenKind::kFloat || is_op("[") || is_op("{");
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parse_template();
}

}  // namespace kvrt::jinja
