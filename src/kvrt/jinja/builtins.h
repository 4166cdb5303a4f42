// What a template can call: filters (x | name), tests (x is name), methods of str and
// dict (x.name()), and the global functions transformers provides. Each fails with a
// Status naming the filter, test or method; unknown names are kNotSupported.
#pragma once

#include <string>

#include "kvrt/core/result.h"
#include "kvrt/jinja/value.h"

namespace kvrt::jinja {

Result<Value> apply_filter(const std::string& name, const Value& input, const CallArgs& args);
Result<bool> apply_test(const std::string& name, const Value& input, const CallArgs& args);

// Calls input.name(args); sets `found` false (and returns an Undefined) when the type of
// `input` has no such method, so the caller can fall back to an attribute.
Result<Value> call_method(const Value& input, const std::string& name, const CallArgs& args,
                          bool& found);

// range, dict, namespace, raise_exception, strftime_now; Undefined for other names.
Value global_function(const std::string& name);

// The Status raise_exception(message) returns: code kInvalidArgument, message
// "raise_exception: " + message.
Status raised(const std::string& message);

// Python's iter(): the items a for loop, `in` and list() see (keys of a dict, code
// points of a str, nothing for Undefined); a TypeError for other kinds.
Result<List> iterate(const Value& value);

// tojson as transformers defines it: json.dumps(value, ensure_ascii=False, indent,
// separators, sort_keys); indent <= 0 with a value still breaks lines like Python.
struct JsonStyle {
  bool pretty = false;  // indent given
  std::string indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
Result<std::string> dump_json(const Value& value, const JsonStyle& style);

}  // namespace kvrt::jinja
