// The values a template computes with. Python's data model, as far as chat templates
// see it: None, bool, int, float, str (UTF-8, indexed by code point), list and dict
// with reference semantics (two names can share one list, as in Python), plus the
// Jinja-only kinds Undefined, namespace and callables (macros, builtins, loop.cycle).
// Dicts keep insertion order, like Python's, so tojson and items() match transformers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt::jinja {

// Ordered, like a Python dict; the JSON that crosses the jinja API.
using Json = nlohmann::ordered_json;

class Value;
using List = std::vector<Value>;
// A dict, and the attributes of a namespace: insertion-ordered pairs. Templates
// hold small dicts, so lookup by linear scan is cheaper than keeping an index.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value value);
};

// Arguments of a call: f(1, 2, key=3).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword `name`, else positional[index], else nullptr.
  const Value* get(size_t index, std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Result<Value>(const CallArgs&)> call;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() = default;  // Undefined
  static Value undefined(std::string name = {});
  static Value none();
  Value(bool b) : kind_(Kind::kBool), data_(b) {}                      // NOLINT: literals convert
  Value(int64_t i) : kind_(Kind::kInt), data_(i) {}                    // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}                     // NOLINT
  Value(double d) : kind_(Kind::kFloat), data_(d) {}                   // NOLINT
  Value(std::string s) : kind_(Kind::kString), data_(std::move(s)) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}                      // NOLINT
  static Value list(List items = {});
  static Value dict(Dict dict = {});
  static Value name_space(Dict attributes = {});
  static Value callable(std::string name, std::function<Result<Value>(const CallArgs&)> fn);
  static Value from_json(const Json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_double() const;  // int or float
  const std::string& as_string() const { return std::get<std::string>(data_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(data_); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }  // dict, namespace
  const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
  // The name an Undefined was looked up by, for error messages.
  const std::string& undefined_name() const { return std::get<std::string>(data_); }

  // Python's bool(value); Undefined is false.
  bool truthy() const;
  // Python's str(value), as {{ }} prints it; Undefined prints empty.
  std::string str() const;
  // Python's repr(value), as str() of a list shows its items.
  std::string repr() const;
  // Python's type name, for error messages: 'str', 'list', 'undefined'.
  std::string type_name() const;
  // JSON, for tojson; fails on Undefined, namespaces and callables like json.dumps.
  Result<Json> to_json() const;

 private:
  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<Callable>>
      data_{std::string()};
};

// Python's ==, including 1 == 1.0 == True, and Undefined == Undefined.
bool equals(const Value& a, const Value& b);
// Python's <, for numbers, strings and lists; other pairs are a TypeError.
Result<bool> less_than(const Value& a, const Value& b);

// Python's repr(float): the shortest digits that round-trip, '1.0', '1e-05', '1e+16'.
std::string float_repr(double value);

}  // namespace kvrt::jinja
