// Expression evaluation of the Interpreter.
#include "kvrt/jinja/builtins.h"
#include "kvrt/jinja/interpreter.h"

namespace kvrt::jinja {
namespace {

Status at_line(const Status& status, int line) {
  if (status.ok() || status.message().rfind("line ", 0) == 0) return status;
  return status.with_context("line " + std::to_string(line));
}

Result<Value> compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value(equals(a, b));
  if (op == "!=") return Value(!equals(a, b));
  if (op == "in" || op == "not in") {
    KVRT_ASSIGN_OR_RETURN(bool in, contains(b, a));
    return Value(op == "in" ? in : !in);
  }
  const bool swap = op == ">" || op == "<=";
  KVRT_ASSIGN_OR_RETURN(bool lt, swap ? less_than(b, a) : less_than(a, b));
  return Value(op == "<" || op == ">" ? lt : !lt);
}

}  // namespace

Result<Value> Interpreter::eval(const Expr& expr, const FramePtr& frame) {
  Result<Value> v = eval_inner(expr, frame);
  if (!v.ok()) return at_line(v.status(), expr.line);
  return v;
}

Status Interpreter::eval_args(const Expr& expr, size_t first, const FramePtr& frame,
                              CallArgs& args) {
  for (size_t i = first; i < expr.children.size(); ++i) {
    KVRT_ASSIGN_OR_RETURN(Value v, eval(*expr.children[i], frame));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, value_expr] : expr.keywords) {
    KVRT_ASSIGN_OR_RETURN(Value v, eval(*value_expr, frame));
    args.keyword.emplace_back(name, std::move(v));
  }
  return Status();
}

Result<Value> Interpreter::eval_call(const Expr& expr, const FramePtr& frame, CallArgs extra) {
  const Expr& callee = *expr.children[0];
  CallArgs args;
  KVRT_RETURN_IF_ERROR(eval_args(expr, 1, frame, args));
  for (auto& kw : extra.keyword) args.keyword.push_back(std::move(kw));
  if (callee.kind == Expr::Kind::kGetAttr) {
    // obj.method(...): Python looks methods up before dict keys.
    KVRT_ASSIGN_OR_RETURN(Value object, eval(*callee.children[0], frame));
    bool found = false;
    Result<Value> result = call_method(object, callee.name, args, found);
    if (found) return result;
    KVRT_ASSIGN_OR_RETURN(Value attribute, get_attribute(object, callee.name));
    if (attribute.kind() == Value::Kind::kCallable) return attribute.as_callable().call(args);
    return invalid_argument("'", object.type_name(), "' object has no method '", callee.name, "'");
  }
  KVRT_ASSIGN_OR_RETURN(Value function, eval(callee, frame));
  if (function.is_undefined()) {
    return not_supported("'", function.undefined_name(), "' is undefined (not a known function)");
  }
  if (function.kind() != Value::Kind::kCallable) {
    return invalid_argument("'", function.type_name(), "' object is not callable");
  }
  return function.as_callable().call(args);
}

Result<Value> Interpreter::eval_filter(const Expr& expr, const FramePtr& frame,
                                       const Value* input) {
  // A filter block's chain starts from `input` instead of an expression.
  Value operand;
  const Expr* base = expr.children[0].get();
  if (base == nullptr) {
    if (input != nullptr) operand = *input;
  } else if (base->kind == Expr::Kind::kFilter) {
    KVRT_ASSIGN_OR_RETURN(operand, eval_filter(*base, frame, input));
  } else {
    KVRT_ASSIGN_OR_RETURN(operand, eval(*base, frame));
  }
  CallArgs args;
  KVRT_RETURN_IF_ERROR(eval_args(expr, 1, frame, args));
  Result<Value> v = apply_filter(expr.name, operand, args);
  if (!v.ok()) return at_line(v.status(), expr.line);
  return v;
}

Result<Value> Interpreter::eval_inner(const Expr& expr, const FramePtr& frame) {
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      return expr.literal;
    case Expr::Kind::kName:
      return lookup(expr.name, frame);
    case Expr::Kind::kList: {
      List items;
      for (const ExprPtr& child : expr.children) {
        KVRT_ASSIGN_OR_RETURN(Value v, eval(*child, frame));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case Expr::Kind::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        KVRT_ASSIGN_OR_RETURN(Value key, eval(*expr.children[i], frame));
        KVRT_ASSIGN_OR_RETURN(Value value, eval(*expr.children[i + 1], frame));
        dict.set(key.str(), std::move(value));
      }
      return Value::dict(std::move(dict));
    }
    case Expr::Kind::kGetAttr: {
      KVRT_ASSIGN_OR_RETURN(Value object, eval(*expr.children[0], frame));
      return get_attribute(object, expr.name);
    }
    case Expr::Kind::kGetItem: {
      KVRT_ASSIGN_OR_RETURN(Value object, eval(*expr.children[0], frame));
      KVRT_ASSIGN_OR_RETURN(Value key, eval(*expr.children[1], frame));
      return get_item(object, key);
    }
    case Expr::Kind::kSlice: {
      KVRT_ASSIGN_OR_RETURN(Value object, eval(*expr.children[0], frame));
      Value parts[3];
      for (size_t i = 0; i < 3; ++i) {
        if (expr.children[i + 1]) {
          KVRT_ASSIGN_OR_RETURN(parts[i], eval(*expr.children[i + 1], frame));
        }
      }
      return slice(object, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall:
      return eval_call(expr, frame, CallArgs{});
    case Expr::Kind::kFilter:
      return eval_filter(expr, frame, nullptr);
    case Expr::Kind::kTest: {
      KVRT_ASSIGN_OR_RETURN(Value operand, eval(*expr.children[0], frame));
      CallArgs args;
      KVRT_RETURN_IF_ERROR(eval_args(expr, 1, frame, args));
      KVRT_ASSIGN_OR_RETURN(bool pass, apply_test(expr.name, operand, args));
      return Value(pass != expr.negated);
    }
    case Expr::Kind::kUnary: {
      KVRT_ASSIGN_OR_RETURN(Value operand, eval(*expr.children[0], frame));
      if (expr.name == "not") return Value(!operand.truthy());
      if (!operand.is_number() && operand.kind() != Value::Kind::kBool) {
        return invalid_argument("bad operand type for unary ", expr.name, ": '",
                                operand.type_name(), "'");
      }
      if (expr.name == "+") return operand;
      return binary_op("-", Value(int64_t{0}), operand);
    }
    case Expr::Kind::kBinary: {
      KVRT_ASSIGN_OR_RETURN(Value left, eval(*expr.children[0], frame));
      // and/or return an operand, as in Python: `a or 'x'`.
      if (expr.name == "and") return left.truthy() ? eval(*expr.children[1], frame) : left;
      if (expr.name == "or") return left.truthy() ? left : eval(*expr.children[1], frame);
      KVRT_ASSIGN_OR_RETURN(Value right, eval(*expr.children[1], frame));
      return binary_op(expr.name, left, right);
    }
    case Expr::Kind::kCompare: {
      KVRT_ASSIGN_OR_RETURN(Value left, eval(*expr.children[0], frame));
      for (size_t i = 0; i < expr.ops.size(); ++i) {
        KVRT_ASSIGN_OR_RETURN(Value right, eval(*expr.children[i + 1], frame));
        KVRT_ASSIGN_OR_RETURN(Value pass, compare(expr.ops[i], left, right));
        if (!pass.truthy()) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::Kind::kCondExpr: {
      KVRT_ASSIGN_OR_RETURN(Value cond, eval(*expr.children[0], frame));
      if (cond.truthy()) return eval(*expr.children[1], frame);
      if (expr.children[2]) return eval(*expr.children[2], frame);
      return Value::undefined();
    }
  }
  return internal_error("unknown expression kind");
}

}  // namespace kvrt::jinja
