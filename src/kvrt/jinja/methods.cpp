// Methods templates call on str and dict values: message.content.startswith('<'),
// text.split('</think>')[-1].lstrip('\n'), tool.items(), message.get('x'). Methods that
// mutate (list.append, dict.update) are not here: transformers renders in Jinja's
// ImmutableSandboxedEnvironment, which refuses them too.
#include <optional>

#include "kvrt/jinja/builtins.h"
#include "kvrt/jinja/text.h"

namespace kvrt::jinja {
namespace {

Result<std::optional<std::string>> optional_string(const CallArgs& args, size_t index,
                                                   const char* name, const char* method) {
  const Value* v = args.get(index, name);
  if (v == nullptr || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) return invalid_argument(method, ": '", name, "' must be a string");
  return std::optional<std::string>(v->as_string());
}

Result<std::string> required_string(const CallArgs& args, size_t index, const char* name,
                                    const char* method) {
  const Value* v = args.get(index, name);
  if (v == nullptr || !v->is_string()) {
    return invalid_argument(method, ": '", name, "' must be a string");
  }
  return v->as_string();
}

int64_t optional_int(const CallArgs& args, size_t index, const char* name, int64_t fallback) {
  const Value* v = args.get(index, name);
  return v != nullptr && v->is_int() ? v->as_int() : fallback;
}

// Returns a bool rather than a Value: GCC 12 under -O2 with ASan reports a false
// "maybe uninitialized" on a Value(bool) returned from this loop.
Result<bool> affix_test(const std::string& s, const CallArgs& args, bool prefix) {
  const char* method = prefix ? "startswith" : "endswith";
  const Value* arg = args.get(0, prefix ? "prefix" : "suffix");
  if (arg == nullptr) return invalid_argument(method, " expects an argument");
  List candidates;
  if (arg->is_list()) {
    candidates = arg->as_list();
  } else {
    candidates.push_back(*arg);
  }
  for (const Value& c : candidates) {
    if (!c.is_string()) return invalid_argument(method, ": argument must be a str");
    const std::string& a = c.as_string();
    if (a.size() > s.size()) continue;
    if (prefix ? s.compare(0, a.size(), a) == 0
               : s.compare(s.size() - a.size(), a.size(), a) == 0) {
      return true;
    }
  }
  return false;
}

Result<Value> string_method(const std::string& s, const std::string& name, const CallArgs& args,
                            bool& found) {
  found = true;
  if (name == "startswith" || name == "endswith") {
    KVRT_ASSIGN_OR_RETURN(const bool match, affix_test(s, args, name == "startswith"));
    return Value(match);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    KVRT_ASSIGN_OR_RETURN(auto chars, optional_string(args, 0, "chars", name.c_str()));
    return Value(text::strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    KVRT_ASSIGN_OR_RETURN(auto sep, optional_string(args, 0, "sep", "split"));
    if (sep && sep->empty()) return invalid_argument("split: empty separator");
    List parts;
    for (auto& part : text::split(s, sep, optional_int(args, 1, "maxsplit", -1))) {
      parts.push_back(Value(std::move(part)));
    }
    return Value::list(std::move(parts));
  }
  if (name == "replace") {
    KVRT_ASSIGN_OR_RETURN(std::string from, required_string(args, 0, "old", "replace"));
    KVRT_ASSIGN_OR_RETURN(std::string to, required_string(args, 1, "new", "replace"));
    return Value(text::replace(s, from, to, optional_int(args, 2, "count", -1)));
  }
  if (name == "upper") return Value(text::upper(s));
  if (name == "lower") return Value(text::lower(s));
  if (name == "title") return Value(text::py_title(s));
  if (name == "capitalize") return Value(text::capitalize(s));
  if (name == "find" || name == "count") {
    KVRT_ASSIGN_OR_RETURN(std::string sub, required_string(args, 0, "sub", name.c_str()));
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(text::length(s) + 1));
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos;
           pos = s.find(sub, pos + sub.size())) {
        ++n;
      }
      return Value(n);
    }
    const size_t pos = s.find(sub);
    if (pos == std::string::npos) return Value(int64_t{-1});
    return Value(static_cast<int64_t>(text::length(std::string_view(s).substr(0, pos))));
  }
  if (name == "join") {
    const Value* items = args.get(0, "iterable");
    if (items == nullptr) return invalid_argument("join expects an iterable");
    KVRT_ASSIGN_OR_RETURN(List list, iterate(*items));
    std::string out;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) return invalid_argument("join: sequence item must be a str");
      if (i > 0) out += s;
      out += list[i].as_string();
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    const std::u32string cps = text::decode(s);
    bool all = !cps.empty();
    for (char32_t c : cps) {
      const bool digit = c >= '0' && c <= '9';
      const bool alpha = text::is_word_char(c) && !digit && c != '_';
      if (name == "isdigit") all = all && digit;
      if (name == "isspace") all = all && text::is_space(c);
      if (name == "isalpha") all = all && alpha;
      if (name == "isalnum") all = all && (alpha || digit);
    }
    return Value(all);
  }
  found = false;
  return Value();
}

Result<Value> dict_method(const Dict& d, const std::string& name, const CallArgs& args,
                          bool& found) {
  found = true;
  if (name == "items") {
    List items;
    for (const auto& [k, v] : d.items) items.push_back(Value::list({Value(k), v}));
    return Value::list(std::move(items));
  }
  if (name == "keys" || name == "values") {
    List items;
    for (const auto& [k, v] : d.items) items.push_back(name == "keys" ? Value(k) : v);
    return Value::list(std::move(items));
  }
  if (name == "get") {
    const Value* key = args.get(0, "key");
    if (key == nullptr) return invalid_argument("get expects a key");
    if (key->is_string()) {
      if (const Value* v = d.find(key->as_string())) return *v;
    }
    const Value* fallback = args.get(1, "default");
    return fallback ? *fallback : Value::none();
  }
  found = false;
  return Value();
}

}  // namespace

Result<Value> call_method(const Value& input, const std::string& name, const CallArgs& args,
                          bool& found) {
  found = false;
  if ((input.is_list() && (name == "append" || name == "extend" || name == "pop" ||
                           name == "insert" || name == "remove")) ||
      (input.is_dict() && (name == "update" || name == "pop" || name == "setdefault"))) {
    found = true;
    return not_supported(input.type_name(), ".", name,
                         " modifies its object, which transformers' sandbox refuses");
  }
  if (input.is_string()) return string_method(input.as_string(), name, args, found);
  if (input.is_dict()) return dict_method(input.as_dict(), name, args, found);
  return Value();
}

}  // namespace kvrt::jinja
