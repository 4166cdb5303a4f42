#include "kvrt/jinja/interpreter.h"

#include "kvrt/jinja/builtins.h"

namespace kvrt::jinja {
namespace {

constexpr int kMaxMacroDepth = 200;

// Errors carry the line of the innermost node that failed.
Status at_line(const Status& status, int line) {
  if (status.ok() || status.message().rfind("line ", 0) == 0) return status;
  return status.with_context("line " + std::to_string(line));
}

Value loop_object(size_t index, const List& items, const Value& cycle) {
  const size_t n = items.size();
  Dict loop;
  loop.set("index", Value(static_cast<int64_t>(index + 1)));
  loop.set("index0", Value(static_cast<int64_t>(index)));
  loop.set("revindex", Value(static_cast<int64_t>(n - index)));
  loop.set("revindex0", Value(static_cast<int64_t>(n - index - 1)));
  loop.set("first", Value(index == 0));
  loop.set("last", Value(index + 1 == n));
  loop.set("length", Value(static_cast<int64_t>(n)));
  loop.set("depth", Value(int64_t{1}));
  loop.set("depth0", Value(int64_t{0}));
  loop.set("previtem", index > 0 ? items[index - 1] : Value::undefined("previtem"));
  loop.set("nextitem", index + 1 < n ? items[index + 1] : Value::undefined("nextitem"));
  loop.set("cycle", cycle);
  return Value::name_space(std::move(loop));
}

Status assign(const std::vector<std::string>& targets, const Value& value, Frame& frame) {
  if (targets.size() == 1) {
    frame.vars[targets[0]] = value;
    return Status();
  }
  KVRT_ASSIGN_OR_RETURN(List items, iterate(value));
  if (items.size() != targets.size()) {
    return invalid_argument("cannot unpack ", items.size(), " values into ", targets.size(),
                            " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = items[i];
  return Status();
}

}  // namespace

Result<std::string> Interpreter::render(const Body& body, const Json& context) {
  if (!context.is_object()) return invalid_argument("the template context must be an object");
  Interpreter interpreter;
  for (const auto& [name, value] : context.items()) {
    interpreter.globals_[name] = Value::from_json(value);
  }
  auto root = std::make_shared<Frame>();
  std::string out;
  Flow flow = Flow::kNormal;
  KVRT_RETURN_IF_ERROR(interpreter.exec(body, root, out, flow));
  return out;
}

Status Interpreter::exec(const Body& body, const FramePtr& frame, std::string& out, Flow& flow) {
  for (const StmtPtr& stmt : body) {
    KVRT_RETURN_IF_ERROR(exec_stmt(*stmt, frame, out, flow));
    if (flow != Flow::kNormal) return Status();
  }
  return Status();
}

Status Interpreter::exec_stmt(const Stmt& stmt, const FramePtr& frame, std::string& out,
                              Flow& flow) {
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      out += stmt.text;
      return Status();
    case Stmt::Kind::kOutput: {
      KVRT_ASSIGN_OR_RETURN(Value v, eval(*stmt.expr, frame));
      out += v.str();
      return Status();
    }
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : stmt.branches) {
        KVRT_ASSIGN_OR_RETURN(Value v, eval(*cond, frame));
        if (v.truthy()) return exec(body, frame, out, flow);
      }
      return exec(stmt.else_body, frame, out, flow);
    case Stmt::Kind::kFor:
      return at_line(exec_for(stmt, frame, out), stmt.line);
    case Stmt::Kind::kSet:
      return at_line(exec_set(stmt, frame), stmt.line);
    case Stmt::Kind::kSetBlock: {
      KVRT_ASSIGN_OR_RETURN(std::string text, capture(stmt.body, frame));
      frame->vars[stmt.targets[0]] = Value(std::move(text));
      return Status();
    }
    case Stmt::Kind::kMacro:
      frame->vars[stmt.text] = make_macro(stmt, frame);
      return Status();
    case Stmt::Kind::kCallBlock:
      return at_line(exec_call_block(stmt, frame, out), stmt.line);
    case Stmt::Kind::kFilterBlock: {
      KVRT_ASSIGN_OR_RETURN(std::string text, capture(stmt.body, frame));
      const Value input(std::move(text));
      KVRT_ASSIGN_OR_RETURN(Value v, eval_filter(*stmt.expr, frame, &input));
      out += v.str();
      return Status();
    }
    case Stmt::Kind::kBreak:
      flow = Flow::kBreak;
      return Status();
    case Stmt::Kind::kContinue:
      flow = Flow::kContinue;
      return Status();
  }
  return Status();
}

Status Interpreter::exec_for(const Stmt& stmt, const FramePtr& frame, std::string& out) {
  KVRT_ASSIGN_OR_RETURN(Value iterable, eval(*stmt.expr, frame));
  KVRT_ASSIGN_OR_RETURN(List all, iterate(iterable));
  // `for x in xs if cond` filters first; loop.* counts the items that pass.
  List items;
  if (stmt.cond) {
    for (const Value& item : all) {
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      KVRT_RETURN_IF_ERROR(assign(stmt.targets, item, *scope));
      KVRT_ASSIGN_OR_RETURN(Value keep, eval(*stmt.cond, scope));
      if (keep.truthy()) items.push_back(item);
    }
  } else {
    items = std::move(all);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    KVRT_RETURN_IF_ERROR(assign(stmt.targets, items[i], *scope));
    const Value cycle = Value::callable("cycle", [i](const CallArgs& args) -> Result<Value> {
      if (args.positional.empty()) return invalid_argument("loop.cycle expects arguments");
      return args.positional[i % args.positional.size()];
    });
    scope->vars["loop"] = loop_object(i, items, cycle);
    Flow flow = Flow::kNormal;
    KVRT_RETURN_IF_ERROR(exec(stmt.body, scope, out, flow));
    if (flow == Flow::kBreak) break;
  }
  if (items.empty()) {
    Flow flow = Flow::kNormal;
    KVRT_RETURN_IF_ERROR(exec(stmt.else_body, frame, out, flow));
  }
  return Status();
}

Status Interpreter::exec_set(const Stmt& stmt, const FramePtr& frame) {
  KVRT_ASSIGN_OR_RETURN(Value value, eval(*stmt.expr, frame));
  if (stmt.attribute.empty()) return assign(stmt.targets, value, *frame);
  KVRT_ASSIGN_OR_RETURN(Value target, lookup(stmt.targets[0], frame));
  if (target.kind() != Value::Kind::kNamespace) {
    return invalid_argument("cannot assign attribute on non-namespace object '", stmt.targets[0],
                            "'");
  }
  target.as_dict().set(stmt.attribute, std::move(value));
  return Status();
}

Value Interpreter::make_macro(const Stmt& stmt, const FramePtr& frame) {
  const Stmt* macro = &stmt;
  // The macro lives in `frame`, so it holds its frame weakly: a strong reference would
  // be a cycle that is never freed.
  std::weak_ptr<Frame> weak_frame = frame;
  return Value::callable(
      stmt.text, [this, macro, weak_frame](const CallArgs& args) -> Result<Value> {
        const FramePtr frame = weak_frame.lock();
        if (!frame)
          return invalid_argument("macro '", macro->text, "' is called outside its scope");
        if (args.positional.size() > macro->params.size()) {
          return invalid_argument("macro '", macro->text, "' takes not more than ",
                                  macro->params.size(), " argument(s)");
        }
        auto scope = std::make_shared<Frame>();
        scope->parent = frame;
        for (size_t i = 0; i < macro->params.size(); ++i) {
          const auto& [name, fallback] = macro->params[i];
          const Value* given = args.get(i, name);
          if (given != nullptr) {
            scope->vars[name] = *given;
          } else if (fallback) {
            KVRT_ASSIGN_OR_RETURN(scope->vars[name], eval(*fallback, scope));
          } else {
            scope->vars[name] = Value::undefined(name);
          }
        }
        for (const auto& [name, value] : args.keyword) {
          bool known = name == "caller";
          for (const auto& param : macro->params) known = known || param.first == name;
          if (!known)
            return invalid_argument("macro '", macro->text, "' has no argument '", name, "'");
          if (name == "caller") scope->vars[name] = value;
        }
        if (depth_ >= kMaxMacroDepth) return invalid_argument("macro recursion is too deep");
        ++depth_;
        Result<std::string> text = capture(macro->body, scope);
        --depth_;
        if (!text.ok()) return text.status();
        return Value(std::move(text).value());
      });
}

Status Interpreter::exec_call_block(const Stmt& stmt, const FramePtr& frame, std::string& out) {
  const Stmt* block = &stmt;
  CallArgs extra;
  extra.keyword.emplace_back(
      "caller",
      Value::callable("caller", [this, block, frame](const CallArgs& args) -> Result<Value> {
        auto scope = std::make_shared<Frame>();
        scope->parent = frame;
        for (size_t i = 0; i < block->params.size(); ++i) {
          const Value* given = args.get(i, block->params[i].first);
          if (given) {
            scope->vars[block->params[i].first] = *given;
          } else if (block->params[i].second) {
            KVRT_ASSIGN_OR_RETURN(scope->vars[block->params[i].first],
                                  eval(*block->params[i].second, scope));
          }
        }
        KVRT_ASSIGN_OR_RETURN(std::string text, capture(block->body, scope));
        return Value(std::move(text));
      }));
  KVRT_ASSIGN_OR_RETURN(Value v, eval_call(*stmt.expr, frame, std::move(extra)));
  out += v.str();
  return Status();
}

Result<std::string> Interpreter::capture(const Body& body, const FramePtr& frame) {
  std::string text;
  Flow flow = Flow::kNormal;
  KVRT_RETURN_IF_ERROR(exec(body, frame, text, flow));
  return text;
}

Result<Value> Interpreter::lookup(const std::string& name, const FramePtr& frame) const {
  for (const Frame* f = frame.get(); f != nullptr; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  auto it = globals_.find(name);
  if (it != globals_.end()) return it->second;
  return global_function(name);
}

}  // namespace kvrt::jinja
