// Global functions, methods of str and dict, iteration and tojson's serializer.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "kvrt/jinja/builtins.h"
#include "kvrt/jinja/text.h"

namespace kvrt::jinja {
namespace {

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

Status dump(const Value& v, const JsonStyle& style, int depth, std::string& out) {
  auto newline = [&](int level) {
    if (!style.pretty) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += style.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return Status();
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return Status();
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return Status();
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += float_repr(d);
      }
      return Status();
    }
    case Value::Kind::kString:
      dump_string(v.as_string(), out);
      return Status();
    case Value::Kind::kList: {
      const List& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return Status();
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += style.item_separator;
        newline(depth + 1);
        KVRT_RETURN_IF_ERROR(dump(items[i], style, depth + 1, out));
      }
      newline(depth);
      out += ']';
      return Status();
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : v.as_dict().items) items.push_back(&item);
      if (items.empty()) {
        out += "{}";
        return Status();
      }
      if (style.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += style.item_separator;
        newline(depth + 1);
        dump_string(items[i]->first, out);
        out += style.key_separator;
        KVRT_RETURN_IF_ERROR(dump(items[i]->second, style, depth + 1, out));
      }
      newline(depth);
      out += '}';
      return Status();
    }
    default:
      return invalid_argument("tojson: Object of type ", v.type_name(),
                              " is not JSON serializable");
  }
}

Result<Value> range_function(const CallArgs& args) {
  std::vector<int64_t> bounds;
  for (const Value& a : args.positional) {
    if (!a.is_int()) return invalid_argument("range: '", a.type_name(), "' is not an integer");
    bounds.push_back(a.as_int());
  }
  if (bounds.empty() || bounds.size() > 3 || !args.keyword.empty()) {
    return invalid_argument("range expects 1 to 3 integer arguments");
  }
  const int64_t start = bounds.size() > 1 ? bounds[0] : 0;
  const int64_t stop = bounds.size() > 1 ? bounds[1] : bounds[0];
  const int64_t step = bounds.size() > 2 ? bounds[2] : 1;
  if (step == 0) return invalid_argument("range: step must not be zero");
  // Jinja's sandbox caps ranges at 100000 items (MAX_RANGE).
  const double count = std::ceil(static_cast<double>(stop - start) / static_cast<double>(step));
  if (count > 100000) return invalid_argument("range: too many items (at most 100000)");
  List items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value(i));
  return Value::list(std::move(items));
}

Result<Value> strftime_now(const CallArgs& args) {
  const Value* format = args.get(0, "format");
  if (format == nullptr || !format->is_string()) {
    return invalid_argument("strftime_now expects a format string");
  }
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), format->as_string().c_str(), &local);
  return Value(std::string(buf, n));
}

Result<Value> namespace_function(const CallArgs& args) {
  Dict attributes;
  for (const Value& a : args.positional) {
    if (!a.is_dict()) return invalid_argument("namespace: positional argument must be a dict");
    for (const auto& [k, v] : a.as_dict().items) attributes.set(k, v);
  }
  for (const auto& [k, v] : args.keyword) attributes.set(k, v);
  return Value::name_space(std::move(attributes));
}

}  // namespace

Result<std::string> dump_json(const Value& value, const JsonStyle& style) {
  std::string out;
  KVRT_RETURN_IF_ERROR(dump(value, style, 0, out));
  return out;
}

Status raised(const std::string& message) {
  return invalid_argument("raise_exception: ", message);
}

Result<List> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return List{};
    case Value::Kind::kList:
      return value.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& item : value.as_dict().items) keys.push_back(Value(item.first));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : text::decode(value.as_string())) {
        chars.push_back(Value(text::encode(std::u32string(1, c))));
      }
      return chars;
    }
    default:
      return invalid_argument("'", value.type_name(), "' object is not iterable");
  }
}

Value global_function(const std::string& name) {
  if (name == "range") return Value::callable(name, range_function);
  if (name == "namespace") return Value::callable(name, namespace_function);
  if (name == "strftime_now") return Value::callable(name, strftime_now);
  if (name == "dict") {
    return Value::callable(name, [](const CallArgs& args) -> Result<Value> {
      Dict d;
      if (!args.positional.empty()) return invalid_argument("dict: use keyword arguments");
      for (const auto& [k, v] : args.keyword) d.set(k, v);
      return Value::dict(std::move(d));
    });
  }
  if (name == "raise_exception") {
    return Value::callable(name, [](const CallArgs& args) -> Result<Value> {
      const Value* message = args.get(0, "message");
      return raised(message ? message->str() : "");
    });
  }
  return Value::undefined(name);
}

}  // namespace kvrt::jinja
