// The semantic rules of blob metadata (A2). The reader runs them after parsing and
// the writer before serializing, so a blob the writer produces is one the reader
// accepts, and both report the same field-named message.
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "kvrt/format/blob_internal.h"

namespace kvrt::format {
namespace detail {
namespace {

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xe0) == 0xc0) {
      extra = 1;
      code = lead & 0x1fu;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2;
      code = lead & 0x0fu;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3;
      code = lead & 0x07u;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3fu);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinForLength[extra] || code > 0x10ffff) return false;  // overlong, range
    if (code >= 0xd800 && code <= 0xdfff) return false;                // surrogates
    i += extra + 1;
  }
  return true;
}

bool has_control_character(std::string_view text) {
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return true;
  }
  return false;
}

// Names and symbols: non-empty UTF-8 without control characters (they end up in
// one-line messages, C strings and the engine's tensor names).
Status check_name(std::string_view name, const std::string& path, std::string_view what) {
  if (name.empty()) return invalid_program(path, ": empty ", what);
  if (!is_valid_utf8(name)) return invalid_program(path, ": ", what, " is not valid UTF-8");
  if (has_control_character(name)) {
    return invalid_program(path, ": ", what, " '", printable(name),
                           "' contains a control character");
  }
  return Status();
}

struct SymbolUse {
  int64_t min;
  int64_t max;
  std::string path;
};

Status check_shape(const BindingSpec& binding, DType dtype, const std::string& path,
                   std::map<std::string, SymbolUse>& symbols) {
  int64_t max_bytes = static_cast<int64_t>(dtype_size(dtype));
  for (size_t d = 0; d < binding.shape.size(); ++d) {
    const graph::Dim& dim = binding.shape[d];
    const std::string dim_path = path + ".shape[" + std::to_string(d) + "]";
    int64_t extent = dim.size;
    if (!dim.is_dynamic()) {
      if (dim.size < 0) return invalid_program(dim_path, ": negative dimension ", dim.size);
    } else {
      KVRT_RETURN_IF_ERROR(check_name(dim.symbol, dim_path + ".symbol", "symbol"));
      if (dim.size != -1) {
        return invalid_program(dim_path, ": dynamic dimension '", printable(dim.symbol),
                               "' must have size -1, got ", dim.size);
      }
      if (dim.min < 0) return invalid_program(dim_path, ".min: negative bound ", dim.min);
      if (dim.min > dim.max) {
        return invalid_program(dim_path, ": min ", dim.min, " is greater than max ", dim.max);
      }
      auto [it, inserted] = symbols.try_emplace(dim.symbol, SymbolUse{dim.min, dim.max, dim_path});
      if (!inserted && (it->second.min != dim.min || it->second.max != dim.max)) {
        return invalid_program(dim_path, ": symbol '", printable(dim.symbol), "' has bounds ",
                               dim.min, "..", dim.max, " here but ", it->second.min, "..",
                               it->second.max, " at ", it->second.path);
      }
      extent = dim.max;
    }
    if (__builtin_mul_overflow(max_bytes, extent, &max_bytes)) {
      return invalid_program(path, ".shape: maximum byte size overflows 64 bits");
    }
  }
  return Status();
}

Status check_bindings(const std::vector<BindingSpec>& bindings, std::string_view side,
                      std::map<std::string, std::string>& names,
                      std::map<std::string, SymbolUse>& symbols) {
  for (size_t i = 0; i < bindings.size(); ++i) {
    const BindingSpec& binding = bindings[i];
    const std::string path = "metadata." + std::string(side) + "[" + std::to_string(i) + "]";
    KVRT_RETURN_IF_ERROR(check_name(binding.name, path + ".name", "binding name"));
    auto [it, inserted] = names.try_emplace(binding.name, path);
    if (!inserted) {
      return invalid_program(path, ".name: duplicate binding name '", binding.name, "' (also ",
                             it->second, ")");
    }
    if (dtype_name(binding.dtype) == "invalid") {
      return invalid_program(path, ".dtype: invalid dtype value ", static_cast<int>(binding.dtype));
    }
    KVRT_RETURN_IF_ERROR(check_shape(binding, binding.dtype, path, symbols));
  }
  return Status();
}

// Static dims equal; dynamic dims with equal bounds (symbols may differ).
bool same_dims(const graph::Dim& a, const graph::Dim& b) {
  if (a.is_dynamic() != b.is_dynamic()) return false;
  if (!a.is_dynamic()) return a.size == b.size;
  return a.min == b.min && a.max == b.max;
}

Status check_alias_storage(const BindingSpec& output, const BindingSpec& input,
                           const std::string& path) {
  if (output.dtype != input.dtype) {
    return invalid_program(path, ": dtype mismatch: output '", output.name, "' is ",
                           dtype_name(output.dtype), ", input '", input.name, "' is ",
                           dtype_name(input.dtype));
  }
  bool same = output.shape.size() == input.shape.size();
  for (size_t d = 0; same && d < output.shape.size(); ++d) {
    same = same_dims(output.shape[d], input.shape[d]);
  }
  if (!same) {
    return invalid_program(path, ": shape mismatch: output '", output.name, "' is ",
                           shape_to_string(output.shape), ", input '", input.name, "' is ",
                           shape_to_string(input.shape));
  }
  return Status();
}

Status check_aliases(const BlobMetadata& metadata) {
  std::map<std::string, std::string> aliased_outputs;  // name -> alias path
  std::map<std::string, std::string> aliased_inputs;
  for (size_t k = 0; k < metadata.aliases.size(); ++k) {
    const AliasSpec& alias = metadata.aliases[k];
    const std::string path = "metadata.aliases[" + std::to_string(k) + "]";
    const int out = find_output(metadata, alias.output);
    if (out < 0) {
      return invalid_program(path, ".output: no output binding named '", printable(alias.output),
                             "'");
    }
    const int in = find_input(metadata, alias.input);
    if (in < 0) {
      return invalid_program(path, ".input: no input binding named '", printable(alias.input), "'");
    }
    if (alias_kind_name(alias.kind) == "invalid") {
      return invalid_program(path, ".kind: invalid kind value ", static_cast<int>(alias.kind));
    }
    auto [out_it, out_new] = aliased_outputs.try_emplace(alias.output, path);
    if (!out_new) {
      return invalid_program(path, ".output: output '", alias.output, "' is already aliased by ",
                             out_it->second);
    }
    auto [in_it, in_new] = aliased_inputs.try_emplace(alias.input, path);
    if (!in_new) {
      return invalid_program(path, ".input: input '", alias.input,
                             "' is already aliased by another output at ", in_it->second);
    }
    KVRT_RETURN_IF_ERROR(check_alias_storage(metadata.outputs[static_cast<size_t>(out)],
                                             metadata.inputs[static_cast<size_t>(in)], path));
  }
  return Status();
}

}  // namespace

std::string printable(std::string_view text, bool escape_high) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || (escape_high && byte >= 0x80)) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

Status validate_blob_metadata(const BlobMetadata& metadata) {
  std::map<std::string, std::string> names;  // one namespace for inputs and outputs
  std::map<std::string, SymbolUse> symbols;
  KVRT_RETURN_IF_ERROR(check_bindings(metadata.inputs, "inputs", names, symbols));
  KVRT_RETURN_IF_ERROR(check_bindings(metadata.outputs, "outputs", names, symbols));
  if (metadata.outputs.empty()) {
    return invalid_program("metadata.outputs: a delegate needs at least one output");
  }
  KVRT_RETURN_IF_ERROR(check_aliases(metadata));
  const std::string& device = metadata.target_device;
  if (device != "cpu" && device != "cuda" && device != "any") {
    return invalid_program("metadata.target_device: unknown target device '", printable(device),
                           "' (expected cpu, cuda or any)");
  }
  return Status();
}

}  // namespace detail

std::string shape_to_string(std::span<const graph::Dim> shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) out += ", ";
    const graph::Dim& dim = shape[d];
    if (dim.is_dynamic()) {
      out += detail::printable(dim.symbol) + "=" + std::to_string(dim.min) + ".." +
             std::to_string(dim.max);
    } else {
      out += std::to_string(dim.size);
    }
  }
  return out + "]";
}

}  // namespace kvrt::format
