// Jinja's built-in filters and tests that chat templates use, with transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "kvrt/jinja/builtins.h"
#include "kvrt/jinja/text.h"

namespace kvrt::jinja {
namespace {

const Value* arg(const CallArgs& args, size_t index, const char* name) {
  return args.get(index, name);
}
bool flag(const CallArgs& args, size_t index, const char* name) {
  const Value* v = arg(args, index, name);
  return v != nullptr && v->truthy();
}

// Jinja's attribute paths: "a.b", where a part that is a number indexes a list.
Value lookup_path(const Value& item, const std::string& path) {
  Value current = item;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    if (dot == std::string::npos) dot = path.size();
    const std::string part = path.substr(pos, dot - pos);
    if (current.is_dict() || current.kind() == Value::Kind::kNamespace) {
      const Value* v = current.as_dict().find(part);
      current = v ? *v : Value::undefined(part);
    } else if (current.is_list() && !part.empty() &&
               part.find_first_not_of("0123456789") == std::string::npos) {
      const size_t i = std::strtoull(part.c_str(), nullptr, 10);
      current = i < current.as_list().size() ? current.as_list()[i] : Value::undefined(part);
    } else {
      return Value::undefined(part);
    }
    pos = dot + 1;
  }
  return current;
}

// The key sort, unique, min and max compare by: lowercased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(text::lower(v.as_string()));
  return v;
}

Result<List> sorted(List items, bool reverse, bool case_sensitive, const Value* attribute) {
  Status error;
  auto key = [&](const Value& v) {
    return sort_key(attribute ? lookup_path(v, attribute->str()) : v, case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    Result<bool> lt = reverse ? less_than(key(b), key(a)) : less_than(key(a), key(b));
    if (!lt.ok()) {
      if (error.ok()) error = lt.status();
      return false;
    }
    return *lt;
  });
  if (!error.ok()) return error.with_context("sort");
  return items;
}

// select/reject/selectattr/rejectattr: args[first_test] names the test, the rest are its
// arguments; without a test, an item's truth decides.
Result<Value> select_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep) {
  KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
  std::string attribute;
  size_t first_test = 0;
  if (by_attribute) {
    if (args.positional.empty()) return invalid_argument("selectattr expects an attribute");
    attribute = args.positional[0].str();
    first_test = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > first_test) {
    test = args.positional[first_test].str();
    test_args.positional.assign(args.positional.begin() + static_cast<long>(first_test) + 1,
                                args.positional.end());
  }
  List out;
  for (const Value& item : items) {
    const Value subject = by_attribute ? lookup_path(item, attribute) : item;
    bool pass = subject.truthy();
    if (test) {
      KVRT_ASSIGN_OR_RETURN(pass, apply_test(*test, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Result<Value> map_items(const Value& input, const CallArgs& args) {
  KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
  List out;
  if (const Value* attribute = arg(args, 99, "attribute")) {
    const Value* fallback = arg(args, 99, "default");
    for (const Value& item : items) {
      Value v = lookup_path(item, attribute->str());
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) return invalid_argument("map expects a filter or attribute=");
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : items) {
    KVRT_ASSIGN_OR_RETURN(Value v, apply_filter(args.positional[0].str(), item, filter_args));
    out.push_back(std::move(v));
  }
  return Value::list(std::move(out));
}

Result<Value> tojson(const Value& input, const CallArgs& args) {
  if (flag(args, 0, "ensure_ascii")) return not_supported("tojson(ensure_ascii=True)");
  JsonStyle style;
  const Value* indent = arg(args, 1, "indent");
  if (indent != nullptr && !indent->is_none()) {
    style.pretty = true;
    style.item_separator.resize(1);  // ",": assigning a literal trips GCC 12's -Wrestrict
    if (indent->is_int()) {
      style.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent->as_int())), ' ');
    } else {
      style.indent = indent->str();
    }
  }
  if (const Value* separators = arg(args, 2, "separators"); separators && !separators->is_none()) {
    if (!separators->is_list() || separators->as_list().size() != 2) {
      return invalid_argument("tojson: separators must be a pair of strings");
    }
    style.item_separator = separators->as_list()[0].str();
    style.key_separator = separators->as_list()[1].str();
  }
  style.sort_keys = flag(args, 3, "sort_keys");
  KVRT_ASSIGN_OR_RETURN(std::string out, dump_json(input, style));
  return Value(std::move(out));
}

Result<Value> indent_filter(const Value& input, const CallArgs& args) {
  const Value* width = arg(args, 0, "width");
  std::string indention =
      width == nullptr ? std::string(4, ' ')
      : width->is_int()
          ? std::string(static_cast<size_t>(std::max<int64_t>(0, width->as_int())), ' ')
          : width->str();
  const bool first = flag(args, 1, "first");
  const bool blank = flag(args, 2, "blank");
  std::vector<std::string> lines = text::splitlines(input.str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if (i > 0 && (blank || !lines[i].empty())) out += indention;
    out += lines[i];
  }
  if (first) out = indention + out;
  return Value(std::move(out));
}

Result<Value> round_filter(const Value& input, const CallArgs& args) {
  if (!input.is_number())
    return invalid_argument("round: '", input.type_name(), "' is not a number");
  const Value* precision_arg = arg(args, 0, "precision");
  const int64_t precision = precision_arg && precision_arg->is_int() ? precision_arg->as_int() : 0;
  const Value* method_arg = arg(args, 1, "method");
  const std::string method = method_arg ? method_arg->str() : "common";
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = input.as_double() * scale;
  double r;
  if (method == "common") {
    if (input.is_int() && precision >= 0) return input;  // Python's round(int) is the int
    r = std::nearbyint(x);  // Python's round(): halves go to the even neighbour
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    return invalid_argument("round: method must be common, ceil or floor");
  }
  return Value(r / scale);
}

Result<Value> number_filter(const Value& input, const CallArgs& args, bool to_int) {
  const Value* fallback = arg(args, 0, "default");
  const Value dflt = fallback ? *fallback : to_int ? Value(int64_t{0}) : Value(0.0);
  if (input.kind() == Value::Kind::kBool)
    return to_int ? Value(int64_t{input.as_bool()}) : Value(input.as_bool() ? 1.0 : 0.0);
  if (input.is_number()) {
    return to_int ? Value(static_cast<int64_t>(input.as_double())) : Value(input.as_double());
  }
  if (!input.is_string()) return dflt;
  const std::string s = text::strip(input.as_string(), std::nullopt, true, true);
  char* end = nullptr;
  if (to_int) {
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(i));
  }
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return dflt;
  return to_int ? Value(static_cast<int64_t>(d)) : Value(d);
}

}  // namespace

Result<Value> apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "safe" || (name == "string" && input.is_string())) return input;
  if (name == "string") return Value(input.str());
  if (name == "trim") {
    const Value* chars = arg(args, 0, "chars");
    std::optional<std::string> set;
    if (chars && !chars->is_none()) set = chars->str();
    return Value(text::strip(input.str(), set, true, true));
  }
  if (name == "length" || name == "count") {
    if (input.is_string()) return Value(static_cast<int64_t>(text::length(input.as_string())));
    if (input.is_list()) return Value(static_cast<int64_t>(input.as_list().size()));
    if (input.is_dict()) return Value(static_cast<int64_t>(input.as_dict().items.size()));
    if (input.is_undefined()) return Value(int64_t{0});
    return invalid_argument("object of type '", input.type_name(), "' has no len()");
  }
  if (name == "tojson") return tojson(input, args);
  if (name == "items") {
    if (input.is_undefined()) return Value::list();
    if (!input.is_dict())
      return invalid_argument("items: '", input.type_name(), "' is not a mapping");
    bool found = false;
    return call_method(input, "items", CallArgs{}, found);
  }
  if (name == "upper") return Value(text::upper(input.str()));
  if (name == "lower") return Value(text::lower(input.str()));
  if (name == "title") return Value(text::jinja_title(input.str()));
  if (name == "capitalize") return Value(text::capitalize(input.str()));
  if (name == "replace") {
    const Value* from = arg(args, 0, "old");
    const Value* to = arg(args, 1, "new");
    const Value* count = arg(args, 2, "count");
    if (!from || !to) return invalid_argument("replace expects old and new");
    return Value(text::replace(input.str(), from->str(), to->str(),
                               count && count->is_int() ? count->as_int() : -1));
  }
  if (name == "default" || name == "d") {
    const bool boolean = flag(args, 1, "boolean");
    if (input.is_undefined() || (boolean && !input.truthy())) {
      const Value* fallback = arg(args, 0, "default_value");
      return fallback ? *fallback : Value("");
    }
    return input;
  }
  if (name == "first" || name == "last") {
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    const Value* sep = arg(args, 0, "d");
    const Value* attribute = arg(args, 1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0 && sep) out += sep->str();
      out += (attribute ? lookup_path(items[i], attribute->str()) : items[i]).str();
    }
    return Value(std::move(out));
  }
  if (name == "list") {
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    return Value::list(std::move(items));
  }
  if (name == "int" || name == "float") return number_filter(input, args, name == "int");
  if (name == "abs") {
    if (input.is_int()) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
    if (input.is_number()) return Value(std::fabs(input.as_double()));
    return invalid_argument("abs: '", input.type_name(), "' is not a number");
  }
  if (name == "round") return round_filter(input, args);
  if (name == "select" || name == "reject")
    return select_items(input, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") {
    return select_items(input, args, true, name == "selectattr");
  }
  if (name == "map") return map_items(input, args);
  if (name == "unique") {
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    const bool case_sensitive = flag(args, 0, "case_sensitive");
    const Value* attribute = arg(args, 1, "attribute");
    List out;
    List seen;
    for (const Value& item : items) {
      Value key = sort_key(attribute ? lookup_path(item, attribute->str()) : item, case_sensitive);
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
        continue;
      }
      seen.push_back(std::move(key));
      out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    KVRT_ASSIGN_OR_RETURN(
        items, sorted(std::move(items), flag(args, 0, "reverse"), flag(args, 1, "case_sensitive"),
                      arg(args, 2, "attribute")));
    return Value::list(std::move(items));
  }
  if (name == "dictsort") {
    if (!input.is_dict())
      return invalid_argument("dictsort: '", input.type_name(), "' is not a mapping");
    bool found = false;
    KVRT_ASSIGN_OR_RETURN(Value items, call_method(input, "items", CallArgs{}, found));
    const Value by_key("0");
    KVRT_ASSIGN_OR_RETURN(List out, sorted(items.as_list(), flag(args, 2, "reverse"),
                                           flag(args, 0, "case_sensitive"), &by_key));
    return Value::list(std::move(out));
  }
  if (name == "reverse") {
    if (input.is_string()) {
      std::u32string cps = text::decode(input.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value(text::encode(cps));
    }
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "min" || name == "max") {
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    if (items.empty()) return Value::undefined(name);
    KVRT_ASSIGN_OR_RETURN(items, sorted(std::move(items), false, flag(args, 0, "case_sensitive"),
                                        arg(args, 1, "attribute")));
    return name == "min" ? items.front() : items.back();
  }
  if (name == "sum") {
    KVRT_ASSIGN_OR_RETURN(List items, iterate(input));
    const Value* attribute = arg(args, 0, "attribute");
    const Value* start = arg(args, 1, "start");
    double total = start && start->is_number() ? start->as_double() : 0.0;
    bool all_int = !start || start->is_int();
    for (const Value& item : items) {
      const Value v = attribute ? lookup_path(item, attribute->str()) : item;
      if (!v.is_number()) return invalid_argument("sum: '", v.type_name(), "' is not a number");
      all_int = all_int && v.is_int();
      total += v.as_double();
    }
    return all_int ? Value(static_cast<int64_t>(total)) : Value(total);
  }
  if (name == "indent") return indent_filter(input, args);
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : text::decode(input.str())) {
      const bool w = text::is_word_char(c);
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value(words);
  }
  if (name == "attr") {
    const Value* attribute = arg(args, 0, "name");
    if (!attribute) return invalid_argument("attr expects a name");
    return lookup_path(input, attribute->str());
  }
  if (name == "e" || name == "escape") {
    std::string out;
    for (char c : input.str()) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out += c;
      }
    }
    return Value(std::move(out));
  }
  return not_supported("filter '", name, "' is not supported");
}

Result<bool> apply_test(const std::string& name, const Value& input, const CallArgs& args) {
  using K = Value::Kind;
  const K k = input.kind();
  if (name == "defined") return k != K::kUndefined;
  if (name == "undefined") return k == K::kUndefined;
  if (name == "none") return k == K::kNone;
  if (name == "string") return k == K::kString;
  if (name == "number") return k == K::kInt || k == K::kFloat || k == K::kBool;
  if (name == "integer") return k == K::kInt;
  if (name == "float") return k == K::kFloat;
  if (name == "boolean") return k == K::kBool;
  if (name == "true") return k == K::kBool && input.as_bool();
  if (name == "false") return k == K::kBool && !input.as_bool();
  if (name == "mapping") return k == K::kDict;
  // Jinja's Undefined has __iter__, __len__ and __getitem__, so it passes these two.
  if (name == "iterable")
    return k == K::kString || k == K::kList || k == K::kDict || k == K::kUndefined;
  if (name == "sequence")
    return k == K::kString || k == K::kList || k == K::kDict || k == K::kUndefined;
  if (name == "callable") return k == K::kCallable;
  if (name == "lower")
    return k == K::kString && text::lower(input.as_string()) == input.as_string();
  if (name == "upper")
    return k == K::kString && text::upper(input.as_string()) == input.as_string();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (k != K::kInt)
      return invalid_argument("test '", name, "': '", input.type_name(), "' is not an integer");
    int64_t divisor = 2;
    if (name == "divisibleby") {
      const Value* d = arg(args, 0, "num");
      if (!d || !d->is_int() || d->as_int() == 0)
        return invalid_argument("divisibleby expects a nonzero integer");
      divisor = d->as_int();
    }
    const int64_t r = input.as_int() % divisor;
    return name == "odd" ? r != 0 : r == 0;
  }
  const Value* other = arg(args, 0, "other");
  if (name == "equalto" || name == "eq" || name == "==" || name == "ne" || name == "!=" ||
      name == "sameas") {
    if (!other) return invalid_argument("test '", name, "' expects an argument");
    const bool eq = equals(input, *other) && (name != "sameas" || input.kind() == other->kind());
    return (name == "ne" || name == "!=") ? !eq : eq;
  }
  if (name == "lt" || name == "<" || name == "gt" || name == ">" || name == "le" || name == "<=" ||
      name == "ge" || name == ">=" || name == "lessthan" || name == "greaterthan") {
    if (!other) return invalid_argument("test '", name, "' expects an argument");
    const bool lt_like =
        name == "lt" || name == "<" || name == "lessthan" || name == "ge" || name == ">=";
    KVRT_ASSIGN_OR_RETURN(bool lt, lt_like ? less_than(input, *other) : less_than(*other, input));
    return (name == "ge" || name == ">=" || name == "le" || name == "<=") ? !lt : lt;
  }
  if (name == "in") {
    if (!other) return invalid_argument("test 'in' expects an argument");
    KVRT_ASSIGN_OR_RETURN(List items, iterate(*other));
    if (other->is_string() && input.is_string()) {
      return other->as_string().find(input.as_string()) != std::string::npos;
    }
    return std::any_of(items.begin(), items.end(),
                       [&](const Value& v) { return equals(v, input); });
  }
  return not_supported("test '", name, "' is not supported");
}

}  // namespace kvrt::jinja
