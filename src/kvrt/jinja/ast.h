// The parsed template: statements (text, output, if, for, set, macro, call, filter
// blocks, break/continue) over expressions. One struct per family, with a kind, keeps
// the tree small to write and to walk; each node keeps its source line for errors.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvrt/jinja/value.h"

namespace kvrt::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using Keywords = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // children: items (tuples are lists too)
    kDict,      // children: key0, value0, key1, value1, ...
    kGetAttr,   // children[0].name
    kGetItem,   // children[0][children[1]]
    kSlice,     // children[0][children[1]:children[2]:children[3]] (null = omitted)
    kCall,      // children[0](children[1..], keywords)
    kFilter,    // children[0] | name(children[1..], keywords); children[0] null in blocks
    kTest,      // children[0] is [not] name(children[1..])
    kUnary,     // name ("-", "+", "not") children[0]
    kBinary,    // children[0] name children[1]; "and"/"or" short-circuit
    kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ...
    kCondExpr,  // children[1] if children[0] else children[2] (children[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  Keywords keywords;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches, else_body
    kFor,          // for targets in expr [if cond]: body else: else_body
    kSet,          // set targets = expr; set targets[0].attribute = expr
    kSetBlock,     // set targets[0] %}body{% endset
    kMacro,        // macro name(params): body
    kCallBlock,    // call(params) expr: body (the body is caller())
    kFilterBlock,  // filter expr (a kFilter chain on null): body
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::vector<std::string> targets;
  std::string attribute;  // set ns.attribute = ...
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  Keywords params;  // name, default (null when none)
};

}  // namespace kvrt::jinja
