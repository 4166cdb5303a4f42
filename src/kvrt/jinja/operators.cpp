// Python's operators on Values: arithmetic, `in`, attribute and item lookup, slices.
#include <cmath>
#include <cstdlib>

#include "kvrt/jinja/builtins.h"
#include "kvrt/jinja/interpreter.h"
#include "kvrt/jinja/text.h"

namespace kvrt::jinja {
namespace {

Status undefined_error(const Value& v) {
  if (v.undefined_name().empty()) return invalid_argument("value is undefined");
  return invalid_argument("'", v.undefined_name(), "' is undefined");
}

Status type_error(const std::string& op, const Value& a, const Value& b) {
  return invalid_argument("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '",
                          b.type_name(), "'");
}

// bool takes part in arithmetic as the int it is in Python.
Value numeric(const Value& v) {
  return v.kind() == Value::Kind::kBool ? Value(int64_t{v.as_bool()}) : v;
}

Result<Value> arithmetic(const std::string& op, const Value& x, const Value& y) {
  const Value a = numeric(x);
  const Value b = numeric(y);
  if (a.is_int() && b.is_int()) {
    const int64_t i = a.as_int();
    const int64_t j = b.as_int();
    int64_t r = 0;
    if (op == "+" && !__builtin_add_overflow(i, j, &r)) return Value(r);
    if (op == "-" && !__builtin_sub_overflow(i, j, &r)) return Value(r);
    if (op == "*" && !__builtin_mul_overflow(i, j, &r)) return Value(r);
    if (op == "//" || op == "%") {
      if (j == 0) return invalid_argument("integer division or modulo by zero");
      if (i == INT64_MIN && j == -1) return invalid_argument("integer overflow in ", op);
      int64_t q = i / j;
      int64_t m = i % j;
      if (m != 0 && ((m < 0) != (j < 0))) {  // Python floors toward negative infinity
        --q;
        m += j;
      }
      return Value(op == "//" ? q : m);
    }
    if (op == "**" && j >= 0) {
      int64_t p = 1;
      for (int64_t k = 0; k < j; ++k) {
        if (__builtin_mul_overflow(p, i, &p)) return invalid_argument("integer overflow in **");
      }
      return Value(p);
    }
    if (op != "/" && op != "**") return invalid_argument("integer overflow in ", op);
  }
  const double p = a.as_double();
  const double q = b.as_double();
  if (op == "+") return Value(p + q);
  if (op == "-") return Value(p - q);
  if (op == "*") return Value(p * q);
  if (op == "**") return Value(std::pow(p, q));
  if (q == 0.0) return invalid_argument("float division by zero");
  if (op == "/") return Value(p / q);
  if (op == "//") return Value(std::floor(p / q));
  double m = std::fmod(p, q);
  if (m != 0.0 && ((m < 0) != (q < 0))) m += q;
  return Value(m);
}

bool is_arith(const Value& v) {
  return v.is_number() || v.kind() == Value::Kind::kBool;
}

// Python normalizes an index against a length: negative counts from the end.
int64_t clamp_index(int64_t i, int64_t n, bool negative_step) {
  if (i < 0) i += n;
  if (negative_step) return i < -1 ? -1 : (i >= n ? n - 1 : i);
  return i < 0 ? 0 : (i > n ? n : i);
}

}  // namespace

Result<Value> binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (is_arith(a) && is_arith(b)) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      List items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(items));
    }
  }
  if (op == "*") {
    const Value& seq = a.is_int() ? b : a;
    const Value& count = a.is_int() ? a : b;
    if (count.is_int() && (seq.is_string() || seq.is_list())) {
      const int64_t n = count.as_int();
      if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq.as_string();
        return Value(std::move(out));
      }
      List items;
      for (int64_t i = 0; i < n; ++i)
        items.insert(items.end(), seq.as_list().begin(), seq.as_list().end());
      return Value::list(std::move(items));
    }
  }
  if (op == "%" && a.is_string()) return not_supported("printf-style '%' string formatting");
  return type_error(op, a, b);
}

Result<bool> contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      return invalid_argument("'in <string>' requires string as left operand, not ",
                              item.type_name());
    }
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) {
    return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
  }
  KVRT_ASSIGN_OR_RETURN(List items, iterate(container));
  for (const Value& v : items) {
    if (equals(v, item)) return true;
  }
  return false;
}

Result<Value> get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) return undefined_error(object);
  if (object.is_dict() || object.kind() == Value::Kind::kNamespace) {
    const Value* v = object.as_dict().find(name);
    return v ? *v : Value::undefined(name);
  }
  return Value::undefined(name);
}

Result<Value> get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) return undefined_error(object);
  if (object.is_dict() || object.kind() == Value::Kind::kNamespace) {
    const Value* v = key.is_string() ? object.as_dict().find(key.as_string()) : nullptr;
    return v ? *v : Value::undefined(key.str());
  }
  if ((object.is_list() || object.is_string()) &&
      (key.is_int() || key.kind() == Value::Kind::kBool)) {
    int64_t i = key.is_int() ? key.as_int() : int64_t{key.as_bool()};
    if (object.is_list()) {
      const int64_t n = static_cast<int64_t>(object.as_list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(key.str());
      return object.as_list()[static_cast<size_t>(i)];
    }
    const std::u32string cps = text::decode(object.as_string());
    const int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(key.str());
    return Value(text::encode(std::u32string(1, cps[static_cast<size_t>(i)])));
  }
  return Value::undefined(key.str());
}

Result<Value> slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) return undefined_error(object);
  auto as_index = [](const Value& v, int64_t fallback) -> Result<int64_t> {
    if (v.is_undefined() || v.is_none()) return fallback;
    if (!v.is_int()) return invalid_argument("slice indices must be integers or None");
    return v.as_int();
  };
  KVRT_ASSIGN_OR_RETURN(int64_t s, as_index(step, 1));
  if (s == 0) return invalid_argument("slice step cannot be zero");
  List items;
  std::u32string cps;
  int64_t n = 0;
  if (object.is_list()) {
    n = static_cast<int64_t>(object.as_list().size());
  } else if (object.is_string()) {
    cps = text::decode(object.as_string());
    n = static_cast<int64_t>(cps.size());
  } else {
    return invalid_argument("'", object.type_name(), "' object is not subscriptable");
  }
  KVRT_ASSIGN_OR_RETURN(int64_t b, as_index(start, s > 0 ? 0 : n - 1));
  KVRT_ASSIGN_OR_RETURN(int64_t e, as_index(stop, s > 0 ? n : -n - 1));
  b = clamp_index(b, n, s < 0);
  e = clamp_index(e, n, s < 0);
  std::u32string out_cps;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) {
    if (object.is_list()) {
      items.push_back(object.as_list()[static_cast<size_t>(i)]);
    } else {
      out_cps.push_back(cps[static_cast<size_t>(i)]);
    }
  }
  if (object.is_list()) return Value::list(std::move(items));
  return Value(text::encode(out_cps));
}

}  // namespace kvrt::jinja
