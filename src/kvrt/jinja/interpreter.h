// Walks the parsed template. Scopes follow Jinja: each for-loop iteration and each
// macro call has its own frame (a `set` inside them does not leak out, which is why
// templates use namespace()); if-blocks share their enclosing frame.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "kvrt/core/result.h"
#include "kvrt/jinja/ast.h"
#include "kvrt/jinja/value.h"

namespace kvrt::jinja {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

class Interpreter {
 public:
  // Renders `body` with the members of `context` as variables.
  static Result<std::string> render(const Body& body, const Json& context);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using FramePtr = std::shared_ptr<Frame>;

  Status exec(const Body& body, const FramePtr& frame, std::string& out, Flow& flow);
  Status exec_stmt(const Stmt& stmt, const FramePtr& frame, std::string& out, Flow& flow);
  Status exec_for(const Stmt& stmt, const FramePtr& frame, std::string& out);
  Status exec_set(const Stmt& stmt, const FramePtr& frame);
  Value make_macro(const Stmt& stmt, const FramePtr& frame);
  Status exec_call_block(const Stmt& stmt, const FramePtr& frame, std::string& out);
  // Renders a body into a string in a child frame: macro bodies, caller(), set blocks.
  Result<std::string> capture(const Body& body, const FramePtr& frame);

  Result<Value> eval(const Expr& expr, const FramePtr& frame);
  Result<Value> eval_inner(const Expr& expr, const FramePtr& frame);
  Result<Value> eval_call(const Expr& expr, const FramePtr& frame, CallArgs extra);
  Result<Value> eval_filter(const Expr& expr, const FramePtr& frame, const Value* input);
  Status eval_args(const Expr& expr, size_t first, const FramePtr& frame, CallArgs& args);
  Result<Value> lookup(const std::string& name, const FramePtr& frame) const;

  std::unordered_map<std::string, Value> globals_;
  int depth_ = 0;  // macro recursion, bounded so a runaway template cannot overflow
};

// Operators, shared with the tests: Python semantics on Values.
Result<Value> binary_op(const std::string& op, const Value& a, const Value& b);
Result<bool> contains(const Value& container, const Value& item);
Result<Value> get_attribute(const Value& object, const std::string& name);
Result<Value> get_item(const Value& object, const Value& key);
Result<Value> slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace kvrt::jinja
