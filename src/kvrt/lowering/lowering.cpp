// lower_program: the program-wide decisions (which buffers and weights exist, where
// each buffer lives) around the per-method builder, and a final self-check with the
// program format's own validator so a lowering bug can never reach a file.
#include "kvrt/lowering/lowering.h"

#include <map>
#include <set>

#include "kvrt/lowering/method_builder.h"
#include "kvrt/lowering/partition_cut.h"

namespace kvrt::lowering {
namespace {

using graph::ValueId;
using graph::ValueKind;

// B4: an aliased cache must be a program-owned buffer. A cache passed in by the caller
// would need an output argument the program cannot write back, so it is refused
// before anything is lowered.
Status check_caches_are_buffers(const MethodGraph& method) {
  for (const graph::Node& node : method.graph->nodes) {
    if (node.op != "kv_cache_write" || node.inputs.empty()) continue;
    const ValueId cache = node.inputs[0];
    if (cache < 0 || static_cast<size_t>(cache) >= method.graph->values.size()) continue;
    const graph::Value& value = method.graph->values[static_cast<size_t>(cache)];
    if (value.kind != ValueKind::kBuffer) {
      return invalid_program("method '", method.name, "': node '", node.name, "' updates '",
                             value.name, "', which is a ", graph::value_kind_name(value.kind),
                             " value, not a registered buffer; aliased caches must be "
                             "program-owned buffers (B4)");
    }
  }
  return Status();
}

Result<std::vector<int64_t>> static_shape(const graph::Value& value, std::string_view what) {
  std::vector<int64_t> shape;
  for (const graph::Dim& dim : value.shape) {
    if (dim.is_dynamic()) return not_supported(what, " '", value.name, "' has a dynamic shape");
    shape.push_back(dim.size);
  }
  return shape;
}

struct BufferUse {
  format::BufferSpec spec;
  bool engine = false;  // some engine node reads it (in any method)
  bool host = false;    // some host node reads it
};

// Registers the buffers and weights of one method, checking agreement with earlier
// methods, and records which side reads each buffer.
Status collect(const MethodGraph& method, const partition::PartitionPlan& plan,
               std::map<std::string, BufferUse>& buffers, std::vector<std::string>& buffer_order,
               format::ProgramSpec& spec) {
  const graph::Graph& g = *method.graph;
  for (const graph::Value& value : g.values) {
    if (value.kind == ValueKind::kBuffer) {
      KVRT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, static_shape(value, "buffer"));
      auto [it, added] = buffers.try_emplace(value.name);
      if (added) {
        it->second.spec = {value.name, value.dtype, shape, format::Arena::kDevice, {}};
        buffer_order.push_back(value.name);
      } else if (it->second.spec.dtype != value.dtype || it->second.spec.shape != shape) {
        return invalid_program("buffer '", value.name,
                               "' has a different dtype or shape in method '", method.name,
                               "' than in an earlier method");
      }
    } else if (value.kind == ValueKind::kParameter) {
      KVRT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, static_shape(value, "weight"));
      auto found = std::find_if(spec.weights.begin(), spec.weights.end(),
                                [&](const auto& w) { return w.name == value.name; });
      if (found == spec.weights.end()) {
        format::WeightSpec weight{value.name, value.dtype, shape, 0, 0};
        KVRT_ASSIGN_OR_RETURN(weight.nbytes, format::max_nbytes(value.dtype, value.shape));
        spec.weights.push_back(std::move(weight));
      } else if (found->dtype != value.dtype || found->shape != shape) {
        return invalid_program("weight '", value.name,
                               "' has a different dtype or shape in method '", method.name,
                               "' than in an earlier method");
      }
    }
  }
  const std::vector<ValueId> roots = buffer_roots(g);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (ValueId v : g.nodes[n].inputs) {
      const ValueId root = roots[static_cast<size_t>(v)];
      if (root < 0) continue;
      BufferUse& use = buffers[g.values[static_cast<size_t>(root)].name];
      (plan.placement[n] == partition::Placement::kEngine ? use.engine : use.host) = true;
    }
  }
  return Status();
}

}  // namespace

Result<LoweredProgram> lower_program(std::span<const MethodGraph> methods,
                                     const LoweringOptions& options) {
  std::vector<partition::PartitionPlan> plans;
  std::map<std::string, int> unmatched;  // force_host name -> methods it missed
  LoweredProgram out;
  std::map<std::string, BufferUse> buffers;
  std::vector<std::string> buffer_order;
  std::set<std::string> method_names;
  for (const MethodGraph& method : methods) {
    if (method.graph == nullptr) return invalid_argument("method '", method.name, "' has no graph");
    if (!method_names.insert(method.name).second) {
      return invalid_argument("method '", method.name, "' is given twice");
    }
    KVRT_RETURN_IF_ERROR(check_caches_are_buffers(method));
    auto plan = partition::partition_graph(*method.graph, options.partition);
    if (!plan.ok()) return plan.status().with_context("method '" + method.name + "'");
    for (const std::string& name : plan->unmatched_force_host) ++unmatched[name];
    KVRT_RETURN_IF_ERROR(collect(method, *plan, buffers, buffer_order, out.spec));
    plans.push_back(std::move(plan).value());
  }
  for (const auto& [name, misses] : unmatched) {
    if (misses == static_cast<int>(methods.size())) {
      return invalid_argument("force_host '", name, "' matches no node name or op");
    }
  }
  // F2: a buffer only engines read lives in the device arena and is bound directly. A
  // buffer that some host kernel reads still lives there if an engine reads it too, and
  // the host side gets explicit copies (F3); a buffer only host kernels read is host.
  std::map<std::string, format::Arena> arenas;
  for (const auto& [name, use] : buffers) {
    arenas[name] = use.engine ? format::Arena::kDevice : format::Arena::kHost;
  }
  for (size_t m = 0; m < methods.size(); ++m) {
    auto lowered = lower_method(methods[m], plans[m], arenas, out.spec.delegates.size(), options);
    if (!lowered.ok()) return lowered.status();
    for (size_t d = 0; d < lowered->delegates.size(); ++d) {
      out.spec.delegates.push_back(lowered->delegates[d]);
      out.blobs.push_back(std::move(lowered->blobs[d]));
      out.partitions.push_back(lowered->partitions[d]);
    }
    out.spec.methods.push_back(std::move(lowered->method));
  }
  for (const std::string& name : buffer_order) {
    format::BufferSpec spec = buffers[name].spec;
    spec.arena = arenas[name];
    for (const format::MethodSpec& method : out.spec.methods) {
      spec.copy_bytes_per_step[method.name] = format::buffer_copy_bytes(method, name);
    }
    out.spec.buffers.push_back(std::move(spec));
  }
  out.spec.producer = options.producer;
  Status valid = format::validate_program(out.spec, out.blobs);
  if (!valid.ok()) return internal_error("lowering produced an invalid program: ", valid.message());
  return out;
}

}  // namespace kvrt::lowering
