// Semantic validation of a program spec, run by the writer before a byte is written and
// by the reader before anything is returned. What it guarantees to the runtime: every
// index and name resolves, every delegate call's arguments match its blob's bindings
// one by one (same name, dtype and rank, A3), every aliased output argument is stored
// in the very storage of its aliased input argument (zero copy, D3/F2), no buffer is
// written except through a declared alias, each mutation is declared once (B5), and
// the memory plan never overlaps two values that are live at once.
#include <algorithm>
#include <limits>
#include <set>
#include <string>

#include "kvrt/format/blob.h"
#include "kvrt/format/program_json.h"

namespace kvrt::format::detail {
namespace {

Status error(const std::string& path, std::string_view what) {
  return invalid_program("program: ", path, ": ", what);
}

std::string idx(std::string_view base, size_t i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

bool same_storage(const Storage& a, const Storage& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case StorageKind::kInput:
      return false;  // two inputs are two caller tensors
    case StorageKind::kPlanned:
      return a.arena == b.arena && a.offset == b.offset && a.nbytes == b.nbytes;
    case StorageKind::kBuffer:
    case StorageKind::kWeight:
      return a.name == b.name;
  }
  return false;
}

template <typename Spec>
int find_by_name(const std::vector<Spec>& specs, std::string_view name) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool shape_equals_static(const std::vector<graph::Dim>& shape, const std::vector<int64_t>& dims) {
  if (shape.size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (shape[i].is_dynamic() || shape[i].size != dims[i]) return false;
  }
  return true;
}

// Everything a method check needs about the program around it.
struct Context {
  const ProgramSpec& spec;
  const std::vector<BlobMetadata>& blobs;
};

class MethodChecker {
 public:
  MethodChecker(const Context& context, const MethodSpec& method, size_t index)
      : ctx_(context), method_(method), path_(idx("methods", index)) {}

  Status run() {
    KVRT_RETURN_IF_ERROR(check_values());
    KVRT_RETURN_IF_ERROR(check_io());
    writer_.assign(method_.values.size(), -1);
    first_.assign(method_.values.size(), -1);
    last_.assign(method_.values.size(), -1);
    for (size_t i = 0; i < method_.instructions.size(); ++i) {
      const std::string path = idx(path_ + ".instructions", i);
      const Instruction& instruction = method_.instructions[i];
      const int step = static_cast<int>(i);
      if (const auto* call = std::get_if<DelegateCall>(&instruction)) {
        KVRT_RETURN_IF_ERROR(check_call(*call, path, step));
      } else if (const auto* kernel = std::get_if<HostKernel>(&instruction)) {
        KVRT_RETURN_IF_ERROR(check_kernel(*kernel, path, step));
      } else {
        KVRT_RETURN_IF_ERROR(check_copy(std::get<CopyInstruction>(instruction), path, step));
      }
    }
    KVRT_RETURN_IF_ERROR(check_outputs_defined());
    KVRT_RETURN_IF_ERROR(check_mutations());
    return check_plan_lifetimes();
  }

 private:
  const ValueSpec& value(ValueIndex v) const { return method_.values[static_cast<size_t>(v)]; }

  Status check_values() {
    std::set<std::string> names;
    for (size_t i = 0; i < method_.values.size(); ++i) {
      const std::string path = idx(path_ + ".values", i);
      const ValueSpec& v = method_.values[i];
      if (v.name.empty()) return error(path + ".name", "empty name");
      if (!names.insert(v.name).second) return error(path + ".name", "duplicate '" + v.name + "'");
      if (v.shape.size() > 6) return error(path + ".shape", "rank above 6");
      auto bytes = max_nbytes(v.dtype, v.shape);
      if (!bytes.ok()) return error(path + ".shape", bytes.status().message());
      const Storage& s = v.storage;
      if (s.kind == StorageKind::kPlanned) {
        const uint64_t arena =
            s.arena == Arena::kDevice ? method_.device_arena_bytes : method_.host_arena_bytes;
        if (s.offset % kPlanAlignment != 0) return error(path + ".offset", "not 64-aligned");
        if (s.nbytes < *bytes) return error(path + ".nbytes", "smaller than the value's max size");
        if (s.nbytes > arena || s.offset > arena - s.nbytes) {
          return error(path + ".offset",
                       "range outside the method's " + std::string(arena_name(s.arena)) + " arena");
        }
      } else if (s.kind == StorageKind::kBuffer) {
        int b = find_by_name(ctx_.spec.buffers, s.name);
        if (b < 0) return error(path + ".storage", "unknown buffer '" + s.name + "'");
        const BufferSpec& buffer = ctx_.spec.buffers[static_cast<size_t>(b)];
        if (v.dtype != buffer.dtype || !shape_equals_static(v.shape, buffer.shape)) {
          return error(path, "dtype/shape differ from buffer '" + s.name + "'");
        }
      } else if (s.kind == StorageKind::kWeight) {
        int w = find_by_name(ctx_.spec.weights, s.name);
        if (w < 0) return error(path + ".storage", "unknown weight '" + s.name + "'");
        const WeightSpec& weight = ctx_.spec.weights[static_cast<size_t>(w)];
        if (v.dtype != weight.dtype || !shape_equals_static(v.shape, weight.shape)) {
          return error(path, "dtype/shape differ from weight '" + s.name + "'");
        }
      }
    }
    return Status();
  }

  Status check_index(ValueIndex v, const std::string& path) const {
    if (v < 0 || static_cast<size_t>(v) >= method_.values.size()) {
      return error(path, "value index " + std::to_string(v) + " out of range");
    }
    return Status();
  }

  Status check_io() {
    std::set<ValueIndex> seen;
    for (size_t i = 0; i < method_.inputs.size(); ++i) {
      const std::string path = idx(path_ + ".inputs", i);
      KVRT_RETURN_IF_ERROR(check_index(method_.inputs[i], path));
      if (value(method_.inputs[i]).storage.kind != StorageKind::kInput) {
        return error(path, "method input must have storage 'input'");
      }
      if (!seen.insert(method_.inputs[i]).second) return error(path, "listed twice");
    }
    for (size_t i = 0; i < method_.values.size(); ++i) {
      if (method_.values[i].storage.kind == StorageKind::kInput &&
          !seen.contains(static_cast<ValueIndex>(i))) {
        return error(idx(path_ + ".values", i), "storage 'input' but not a method input");
      }
    }
    seen.clear();
    for (size_t i = 0; i < method_.outputs.size(); ++i) {
      const std::string path = idx(path_ + ".outputs", i);
      KVRT_RETURN_IF_ERROR(check_index(method_.outputs[i], path));
      if (value(method_.outputs[i]).storage.kind != StorageKind::kPlanned) {
        return error(path, "method output must be planned storage");
      }
      if (!seen.insert(method_.outputs[i]).second) return error(path, "listed twice");
    }
    return Status();
  }

  // A read at `step`: the value must exist, and if an instruction writes it, that
  // instruction comes first. Values no instruction writes are inputs/buffers/weights.
  Status read(ValueIndex v, const std::string& path, int step) {
    KVRT_RETURN_IF_ERROR(check_index(v, path));
    const size_t i = static_cast<size_t>(v);
    if (writer_[i] < 0 && value(v).storage.kind == StorageKind::kPlanned) {
      return error(path, "reads planned value '" + value(v).name + "' before it is written");
    }
    if (first_[i] < 0) first_[i] = step;
    last_[i] = step;
    return Status();
  }

  Status write(ValueIndex v, const std::string& path, int step) {
    KVRT_RETURN_IF_ERROR(check_index(v, path));
    const size_t i = static_cast<size_t>(v);
    const StorageKind kind = value(v).storage.kind;
    if (kind == StorageKind::kInput || kind == StorageKind::kWeight) {
      return error(path, "writes read-only value '" + value(v).name + "'");
    }
    if (writer_[i] >= 0) return error(path, "value '" + value(v).name + "' written twice");
    if (first_[i] >= 0) return error(path, "value '" + value(v).name + "' read before written");
    writer_[i] = step;
    first_[i] = step;
    last_[i] = step;
    return Status();
  }

  Status check_call(const DelegateCall& call, const std::string& path, int step) {
    if (call.delegate < 0 || static_cast<size_t>(call.delegate) >= ctx_.spec.delegates.size()) {
      return error(path + ".delegate", "delegate index out of range");
    }
    const size_t d = static_cast<size_t>(call.delegate);
    if (ctx_.spec.delegates[d].method != method_.name) {
      return error(path + ".delegate",
                   "delegate belongs to method '" + ctx_.spec.delegates[d].method + "'");
    }
    const BlobMetadata& blob = ctx_.blobs[d];
    if (call.num_inputs != blob.inputs.size() ||
        call.args.size() != blob.inputs.size() + blob.outputs.size()) {
      return error(path + ".args", "argument count " + std::to_string(call.args.size()) + " (" +
                                       std::to_string(call.num_inputs) +
                                       " inputs) differs from the blob's bindings");
    }
    for (size_t a = 0; a < call.args.size(); ++a) {
      const std::string arg_path = idx(path + ".args", a);
      const bool is_input = a < call.num_inputs;
      const BindingSpec& binding = is_input ? blob.inputs[a] : blob.outputs[a - call.num_inputs];
      KVRT_RETURN_IF_ERROR(is_input ? read(call.args[a], arg_path, step)
                                    : write(call.args[a], arg_path, step));
      const ValueSpec& v = value(call.args[a]);
      // Positional binding is checked by name here, so a permuted order fails to load
      // instead of binding one tensor's storage to another's binding (B2, B3).
      if (v.name != binding.name || v.dtype != binding.dtype ||
          v.shape.size() != binding.shape.size()) {
        return error(arg_path, "value '" + v.name + "' does not match blob binding '" +
                                   binding.name + "' at this argument position");
      }
    }
    std::set<std::string> aliased;
    for (const AliasSpec& alias : blob.aliases) {
      const int in = find_input(blob, alias.input);
      const int out = find_output(blob, alias.output);
      if (in < 0 || out < 0) return error(path, "blob alias names an unknown binding");
      aliased.insert(alias.output);
      const ValueSpec& in_value = value(call.args[static_cast<size_t>(in)]);
      const ValueSpec& out_value = value(call.args[call.num_inputs + static_cast<size_t>(out)]);
      if (!same_storage(in_value.storage, out_value.storage)) {
        return error(idx(path + ".args", call.num_inputs + static_cast<size_t>(out)),
                     "aliased output '" + out_value.name + "' is not stored in the storage of '" +
                         in_value.name + "' (an alias must bind one pointer twice)");
      }
    }
    for (size_t o = 0; o < blob.outputs.size(); ++o) {
      const ValueSpec& v = value(call.args[call.num_inputs + o]);
      if (v.storage.kind == StorageKind::kBuffer && !aliased.contains(blob.outputs[o].name)) {
        return error(idx(path + ".args", call.num_inputs + o),
                     "output '" + v.name + "' is stored in buffer '" + v.storage.name +
                         "' but the blob declares no alias for it");
      }
    }
    return Status();
  }

  Status check_kernel(const HostKernel& kernel, const std::string& path, int step) {
    if (kernel.op.empty()) return error(path + ".op", "empty op");
    for (size_t i = 0; i < kernel.inputs.size(); ++i) {
      KVRT_RETURN_IF_ERROR(read(kernel.inputs[i], idx(path + ".inputs", i), step));
    }
    for (size_t i = 0; i < kernel.outputs.size(); ++i) {
      const std::string out_path = idx(path + ".outputs", i);
      const ValueIndex out = kernel.outputs[i];
      // An in-place kv_cache_write may name its cache input as its output.
      const bool in_place =
          kernel.op == "kv_cache_write" && !kernel.inputs.empty() && out == kernel.inputs[0];
      if (!in_place) KVRT_RETURN_IF_ERROR(write(out, out_path, step));
    }
    if (kernel.op == "kv_cache_write") {
      if (kernel.inputs.empty() || kernel.outputs.size() != 1) {
        return error(path, "kv_cache_write needs a cache input and one output");
      }
      const Storage& cache = value(kernel.inputs[0]).storage;
      if (kernel.outputs[0] != kernel.inputs[0] &&
          !same_storage(cache, value(kernel.outputs[0]).storage)) {
        return error(path + ".outputs[0]", "kv_cache_write output must share its cache's storage");
      }
    }
    return Status();
  }

  uint64_t storage_bytes(const ValueSpec& v) const {
    if (v.storage.kind == StorageKind::kPlanned) return v.storage.nbytes;
    auto bytes = max_nbytes(v.dtype, v.shape);
    return bytes.ok() ? *bytes : 0;
  }

  Status check_copy(const CopyInstruction& copy, const std::string& path, int step) {
    KVRT_RETURN_IF_ERROR(read(copy.src, path + ".src", step));
    KVRT_RETURN_IF_ERROR(write(copy.dst, path + ".dst", step));
    if (copy.src == copy.dst) return error(path, "copies a value onto itself");
    if (copy.nbytes == 0 || copy.nbytes > storage_bytes(value(copy.src)) ||
        copy.nbytes > storage_bytes(value(copy.dst))) {
      return error(path + ".nbytes", "0 or larger than source or destination");
    }
    return Status();
  }

  Status check_outputs_defined() {
    for (size_t i = 0; i < method_.outputs.size(); ++i) {
      const size_t v = static_cast<size_t>(method_.outputs[i]);
      if (writer_[v] < 0) return error(idx(path_ + ".outputs", i), "never written");
      last_[v] = static_cast<int>(method_.instructions.size());  // live until the caller reads it
    }
    return Status();
  }

  // Each buffer written by the method is declared exactly once, naming the value the
  // buffer holds afterwards (B5).
  Status check_mutations() {
    std::set<std::string> written;
    for (size_t v = 0; v < method_.values.size(); ++v) {
      if (writer_[v] >= 0 && method_.values[v].storage.kind == StorageKind::kBuffer) {
        written.insert(method_.values[v].storage.name);
      }
    }
    std::set<std::string> declared;
    for (size_t i = 0; i < method_.mutations.size(); ++i) {
      const std::string path = idx(path_ + ".mutations", i);
      const MutationSpec& mutation = method_.mutations[i];
      if (find_by_name(ctx_.spec.buffers, mutation.buffer) < 0) {
        return error(path + ".buffer", "unknown buffer '" + mutation.buffer + "'");
      }
      if (!declared.insert(mutation.buffer).second) {
        return error(path, "buffer '" + mutation.buffer + "' declared twice");
      }
      KVRT_RETURN_IF_ERROR(check_index(mutation.value, path + ".value"));
      const ValueSpec& v = value(mutation.value);
      if (v.storage.kind != StorageKind::kBuffer || v.storage.name != mutation.buffer ||
          writer_[static_cast<size_t>(mutation.value)] < 0) {
        return error(path + ".value",
                     "'" + v.name + "' is not a write of buffer '" + mutation.buffer + "'");
      }
    }
    if (written != declared) {
      for (const auto& name : written) {
        if (!declared.contains(name)) {
          return error(path_ + ".mutations", "buffer '" + name + "' is written but undeclared");
        }
      }
    }
    return Status();
  }

  Status check_plan_lifetimes() const {
    std::vector<size_t> planned;
    for (size_t v = 0; v < method_.values.size(); ++v) {
      if (method_.values[v].storage.kind == StorageKind::kPlanned && first_[v] >= 0) {
        planned.push_back(v);
      }
    }
    for (size_t a = 0; a < planned.size(); ++a) {
      for (size_t b = a + 1; b < planned.size(); ++b) {
        const size_t x = planned[a], y = planned[b];
        const Storage& sx = method_.values[x].storage;
        const Storage& sy = method_.values[y].storage;
        const bool bytes_overlap = sx.arena == sy.arena && sx.offset < sy.offset + sy.nbytes &&
                                   sy.offset < sx.offset + sx.nbytes;
        const bool live_overlap = first_[x] <= last_[y] && first_[y] <= last_[x];
        if (bytes_overlap && live_overlap) {
          return error(
              idx(path_ + ".values", y),
              "planned bytes overlap '" + method_.values[x].name + "' while both are live");
        }
      }
    }
    return Status();
  }

  const Context& ctx_;
  const MethodSpec& method_;
  std::string path_;
  std::vector<int> writer_;  // instruction that writes each value, -1 if none
  std::vector<int> first_;   // first instruction touching the value
  std::vector<int> last_;    // last instruction touching the value
};

template <typename Spec>
Status check_unique_names(const std::vector<Spec>& specs, std::string_view field) {
  std::set<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name.empty()) return error(idx(field, i) + ".name", "empty name");
    if (!names.insert(specs[i].name).second) {
      return error(idx(field, i) + ".name", "duplicate '" + specs[i].name + "'");
    }
  }
  return Status();
}

}  // namespace

Status validate_weights(const std::vector<WeightSpec>& weights, uint64_t segment_size) {
  KVRT_RETURN_IF_ERROR(check_unique_names(weights, "weights"));
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (size_t i = 0; i < weights.size(); ++i) {
    const WeightSpec& w = weights[i];
    const std::string path = idx("weights", i);
    auto bytes = static_nbytes(w.dtype, w.shape);
    if (!bytes.ok()) return error(path + ".shape", bytes.status().message());
    if (*bytes != w.nbytes) return error(path + ".nbytes", "differs from shape x dtype size");
    if (w.offset % kWeightAlignment != 0) return error(path + ".offset", "not 64-aligned");
    if (w.nbytes > segment_size || w.offset > segment_size - w.nbytes) {
      return error(path + ".offset", "range outside the weight segment");
    }
    if (w.nbytes > 0) ranges.emplace_back(w.offset, w.offset + w.nbytes);
  }
  if (segment_size == std::numeric_limits<uint64_t>::max()) return Status();  // not laid out
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return error("weights", "weight ranges overlap");
  }
  return Status();
}

Result<uint64_t> static_nbytes(DType dtype, std::span<const int64_t> shape) {
  int64_t total = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t dim : shape) {
    if (dim < 0 || !checked_mul(total, dim, &total)) return invalid_program("size overflows");
  }
  return static_cast<uint64_t>(total);
}

std::vector<std::string> program_features_needed(const ProgramSpec& spec) {
  for (const MethodSpec& method : spec.methods) {
    for (const Instruction& instruction : method.instructions) {
      const auto* call = std::get_if<DelegateCall>(&instruction);
      if (call == nullptr) continue;
      for (size_t a = call->num_inputs; a < call->args.size(); ++a) {
        const ValueIndex v = call->args[a];
        if (v >= 0 && static_cast<size_t>(v) < method.values.size() &&
            method.values[static_cast<size_t>(v)].storage.kind == StorageKind::kBuffer) {
          return {std::string(kProgramFeatureAliasedIo)};
        }
      }
    }
  }
  return {};
}

Status validate_program_spec(const ProgramSpec& spec,
                             std::span<const std::span<const std::byte>> blobs,
                             uint64_t weight_segment_size) {
  for (const auto& feature : program_features_needed(spec)) {
    if (std::find(spec.required_features.begin(), spec.required_features.end(), feature) ==
        spec.required_features.end()) {
      return error("required_features", "missing '" + feature + "' which the program uses");
    }
  }
  KVRT_RETURN_IF_ERROR(validate_weights(spec.weights, weight_segment_size));
  KVRT_RETURN_IF_ERROR(check_unique_names(spec.buffers, "buffers"));
  KVRT_RETURN_IF_ERROR(check_unique_names(spec.methods, "methods"));
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    const BufferSpec& buffer = spec.buffers[i];
    auto bytes = static_nbytes(buffer.dtype, buffer.shape);
    if (!bytes.ok()) return error(idx("buffers", i) + ".shape", bytes.status().message());
    if (*bytes > kMaxPlausibleBytes) {
      return error(idx("buffers", i) + ".shape",
                   std::to_string(*bytes) + " bytes is implausible (the limit is 2^48)");
    }
    for (const auto& [method, copied] : buffer.copy_bytes_per_step) {
      const int m = find_by_name(spec.methods, method);
      if (m < 0) return error(idx("buffers", i) + ".copy_bytes_per_step", "unknown method");
      if (copied != buffer_copy_bytes(spec.methods[static_cast<size_t>(m)], buffer.name)) {
        return error(idx("buffers", i) + ".copy_bytes_per_step." + method,
                     "differs from the method's copy instructions");
      }
    }
    // One entry per method, 0 meaning zero-copy (F3): a missing one would leave
    // `inspect` unable to say what a step of that method costs.
    for (const MethodSpec& method : spec.methods) {
      if (!buffer.copy_bytes_per_step.contains(method.name)) {
        return error(idx("buffers", i) + ".copy_bytes_per_step",
                     "no entry for method '" + method.name + "'");
      }
    }
  }
  if (blobs.size() != spec.delegates.size()) {
    return error("delegates", "blob count differs from delegate count");
  }
  std::vector<BlobMetadata> metadata;
  std::vector<int> calls(spec.delegates.size(), 0);
  for (size_t i = 0; i < spec.delegates.size(); ++i) {
    const DelegateSpec& delegate = spec.delegates[i];
    if (delegate.backend.empty()) return error(idx("delegates", i) + ".backend", "empty");
    if (find_by_name(spec.methods, delegate.method) < 0) {
      return error(idx("delegates", i) + ".method", "unknown method '" + delegate.method + "'");
    }
    auto blob = read_blob(blobs[i]);
    if (!blob.ok()) return blob.status().with_context("program: " + idx("delegates", i));
    metadata.push_back(blob->metadata);
  }
  const Context context{spec, metadata};
  for (size_t m = 0; m < spec.methods.size(); ++m) {
    KVRT_RETURN_IF_ERROR(MethodChecker(context, spec.methods[m], m).run());
    for (const Instruction& instruction : spec.methods[m].instructions) {
      if (const auto* call = std::get_if<DelegateCall>(&instruction)) {
        ++calls[static_cast<size_t>(call->delegate)];
      }
    }
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i] != 1) {
      return error(idx("delegates", i), "called " + std::to_string(calls[i]) +
                                            " times (each delegate is called exactly once)");
    }
  }
  return Status();
}

}  // namespace kvrt::format::detail

namespace kvrt::format {

Result<uint64_t> max_nbytes(DType dtype, std::span<const graph::Dim> shape) {
  int64_t total = static_cast<int64_t>(dtype_size(dtype));
  for (const graph::Dim& dim : shape) {
    const int64_t size = dim.is_dynamic() ? dim.max : dim.size;
    if (dim.is_dynamic() && dim.min > dim.max) return invalid_program("dim min above max");
    if (size < 0 || !checked_mul(total, size, &total)) return invalid_program("size overflows");
  }
  return static_cast<uint64_t>(total);
}

uint64_t buffer_copy_bytes(const MethodSpec& method, std::string_view buffer) {
  uint64_t total = 0;
  auto in_buffer = [&](ValueIndex v) {
    if (v < 0 || static_cast<size_t>(v) >= method.values.size()) return false;
    const Storage& s = method.values[static_cast<size_t>(v)].storage;
    return s.kind == StorageKind::kBuffer && s.name == buffer;
  };
  for (const Instruction& instruction : method.instructions) {
    if (const auto* copy = std::get_if<CopyInstruction>(&instruction)) {
      if (in_buffer(copy->src) || in_buffer(copy->dst)) total += copy->nbytes;
    }
  }
  return total;
}

}  // namespace kvrt::format
