// One method, node by node. The delegate call's argument order is the program's own
// choice, made here and nowhere else: inputs by method value index (buffers, then
// method inputs, then intermediates in creation order), outputs with the cache updates
// first. The partition subgraph keeps the engine's order. The blob's binding lists are
// then derived from the call's arguments through value identity (B2) and the written
// blob is read back and asserted against the call (B2, B3, B4) before it is kept.
#include "kvrt/lowering/method_builder.h"

#include <algorithm>
#include <set>

#include "kvrt/format/blob.h"
#include "kvrt/lowering/memory_plan.h"
#include "kvrt/lowering/partition_cut.h"

namespace kvrt::lowering {
namespace {

using format::Arena;
using format::Storage;
using format::StorageKind;
using format::ValueIndex;
using graph::ValueId;
using graph::ValueKind;

constexpr std::string_view kCacheWriteOp = "kv_cache_write";

class MethodBuilder {
 public:
  MethodBuilder(const MethodGraph& method, const partition::PartitionPlan& plan,
                const std::map<std::string, Arena>& arenas, size_t delegate_base,
                const LoweringOptions& options)
      : graph_(*method.graph),
        plan_(plan),
        arenas_(arenas),
        delegate_base_(delegate_base),
        options_(options),
        roots_(buffer_roots(graph_)),
        primary_(graph_.values.size(), -1),
        staged_(graph_.values.size(), -1) {
    out_.method.name = method.name;
    for (const graph::Value& value : graph_.values) names_.insert(value.name);
  }

  Result<LoweredMethod> run() {
    // Program state first, then the caller's inputs (the order of an exported
    // signature): this is also the order of every delegate call's inputs.
    for (size_t g = 0; g < graph_.values.size(); ++g) {
      if (graph_.values[g].kind != ValueKind::kBuffer) continue;
      add_value(graph_.values[g].name, static_cast<ValueId>(g), buffer_storage(g));
    }
    for (ValueId g : graph_.inputs) {
      if (value_of(g).kind != ValueKind::kInput) continue;
      const ValueIndex v = add_value(value_of(g).name, g, {StorageKind::kInput});
      out_.method.inputs.push_back(v);
    }
    for (size_t n = 0; n < graph_.nodes.size();) {
      const int p = plan_.partition_of[n];
      if (p >= 0) {
        KVRT_RETURN_IF_ERROR(emit_call(static_cast<size_t>(p)));
        n += plan_.partitions[static_cast<size_t>(p)].count;
      } else {
        KVRT_RETURN_IF_ERROR(emit_kernel(graph_.nodes[n]));
        ++n;
      }
    }
    KVRT_RETURN_IF_ERROR(finish());
    return std::move(out_);
  }

 private:
  const graph::Value& value_of(ValueId g) const { return graph_.values[static_cast<size_t>(g)]; }
  format::MethodSpec& method() { return out_.method; }

  Storage buffer_storage(size_t g) const {
    return {StorageKind::kBuffer, Arena::kDevice, 0, 0,
            graph_.values[static_cast<size_t>(roots_[g])].name};
  }
  Arena buffer_arena(size_t g) const {
    auto it = arenas_.find(graph_.values[static_cast<size_t>(roots_[g])].name);
    return it == arenas_.end() ? Arena::kHost : it->second;
  }

  ValueIndex add_value(const std::string& name, ValueId g, Storage storage) {
    const ValueId source = g;
    const graph::Value& value = value_of(source);
    method().values.push_back({name, value.dtype, value.shape, std::move(storage)});
    graph_of_.push_back(g);
    host_touched_.push_back(false);
    const auto v = static_cast<ValueIndex>(method().values.size() - 1);
    if (primary_[static_cast<size_t>(g)] < 0) primary_[static_cast<size_t>(g)] = v;
    return v;
  }

  // A fresh value standing for graph value g: in g's buffer when g is buffer-backed,
  // else planned (arena decided in finish()).
  ValueIndex define(ValueId g) {
    const size_t i = static_cast<size_t>(g);
    primary_[i] = -1;
    const Storage storage =
        roots_[i] >= 0 ? buffer_storage(i) : Storage{StorageKind::kPlanned, Arena::kDevice};
    return add_value(value_of(g).name, g, storage);
  }

  Result<ValueIndex> use(ValueId g, std::string_view user) const {
    const ValueIndex v = primary_[static_cast<size_t>(g)];
    if (v < 0) {
      return internal_error("lowering: '", user, "' reads '", value_of(g).name,
                            "' before any instruction defines it");
    }
    return v;
  }

  std::string unique_name(const std::string& base) {
    std::string name = base;
    for (int i = 2; names_.contains(name); ++i) name = base + "#" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  void emit_copy(ValueIndex src, ValueIndex dst) {
    const format::ValueSpec& value = method().values[static_cast<size_t>(src)];
    const uint64_t bytes = format::max_nbytes(value.dtype, value.shape).value();
    const format::CopyInstruction copy{src, dst, bytes};
    method().instructions.emplace_back(copy);
  }

  // The host copy of a buffer-backed value that lives in a device buffer (F3): made
  // once per value, by a device-to-host copy into a host staging value.
  Result<ValueIndex> staged(ValueId g, std::string_view user) {
    const size_t i = static_cast<size_t>(g);
    if (staged_[i] >= 0) return staged_[i];
    KVRT_ASSIGN_OR_RETURN(ValueIndex source, use(g, user));
    const ValueIndex s = add_value(unique_name(value_of(g).name + ".host"), g,
                                   {StorageKind::kPlanned, Arena::kHost});
    graph_of_[static_cast<size_t>(s)] = -1;  // not the identity of any delegate argument
    emit_copy(source, s);
    staged_[i] = s;
    return s;
  }

  Result<ValueIndex> weight_value(ValueId g) {
    auto it = weights_.find(g);
    if (it != weights_.end()) return it->second;
    for (const graph::Dim& dim : value_of(g).shape) {
      if (dim.is_dynamic())
        return not_supported("weight '", value_of(g).name, "' has a dynamic shape");
    }
    const ValueIndex v = add_value(value_of(g).name, g,
                                   {StorageKind::kWeight, Arena::kHost, 0, 0, value_of(g).name});
    weights_.emplace(g, v);
    return v;
  }

  Status emit_kernel(const graph::Node& node) {
    format::HostKernel kernel{node.op, node.name, {}, {}, node.attributes};
    for (ValueId g : node.inputs) {
      const size_t i = static_cast<size_t>(g);
      ValueIndex v;
      if (value_of(g).kind == ValueKind::kParameter) {
        KVRT_ASSIGN_OR_RETURN(v, weight_value(g));
      } else if (roots_[i] >= 0 && buffer_arena(i) == Arena::kDevice) {
        KVRT_ASSIGN_OR_RETURN(v, staged(g, node.name));
      } else {
        KVRT_ASSIGN_OR_RETURN(v, use(g, node.name));
      }
      host_touched_[static_cast<size_t>(v)] = true;
      kernel.inputs.push_back(v);
    }
    if (node.op == kCacheWriteOp) {
      const ValueId updated = node.outputs[0];
      const size_t cache = static_cast<size_t>(node.inputs[0]);
      if (buffer_arena(cache) == Arena::kDevice) {
        // In place on the staging copy, then written back: two copies per call (F3).
        const ValueIndex s = kernel.inputs[0];
        kernel.outputs.push_back(s);
        method().instructions.emplace_back(std::move(kernel));
        staged_[static_cast<size_t>(updated)] = s;
        emit_copy(s, define(updated));
        return Status();
      }
      kernel.outputs.push_back(define(updated));
    } else {
      for (ValueId g : node.outputs) {
        const ValueIndex v = define(g);
        host_touched_[static_cast<size_t>(v)] = true;
        kernel.outputs.push_back(v);
      }
    }
    method().instructions.emplace_back(std::move(kernel));
    return Status();
  }

  static format::BindingSpec binding(const graph::Value& value) {
    return {value.name, value.dtype, value.shape};
  }

  Status emit_call(size_t p) {
    KVRT_ASSIGN_OR_RETURN(PartitionCut cut, cut_partition(graph_, plan_, p, roots_));
    const graph::Graph& sub = cut.subgraph;
    const std::string where = "method '" + method().name + "' partition " + std::to_string(p);

    // Inputs: the program's order is method value order, whatever order the subgraph has.
    std::vector<std::pair<ValueIndex, ValueId>> inputs;  // (call argument, subgraph id)
    for (ValueId s : sub.inputs) {
      const ValueId g = cut.from_sub[static_cast<size_t>(s)];
      if (roots_[static_cast<size_t>(g)] >= 0 &&
          buffer_arena(static_cast<size_t>(g)) != Arena::kDevice) {
        return internal_error("lowering: ", where, " reads host-arena buffer value '",
                              value_of(g).name, "'");
      }
      KVRT_ASSIGN_OR_RETURN(ValueIndex v, use(g, where));
      inputs.emplace_back(v, s);
    }
    std::sort(inputs.begin(), inputs.end());
    // Outputs: cache updates first, then the rest in the subgraph's order.
    std::vector<ValueId> out_subs;
    for (const graph::BufferMutation& alias : cut.aliases) out_subs.push_back(alias.updated);
    for (ValueId s : sub.outputs) {
      if (std::find(out_subs.begin(), out_subs.end(), s) == out_subs.end()) out_subs.push_back(s);
    }

    format::DelegateCall call;
    call.delegate = static_cast<int32_t>(delegate_base_ + out_.delegates.size());
    format::BlobMetadata metadata;
    for (const auto& [v, s] : inputs) {
      call.args.push_back(v);
      metadata.inputs.push_back(binding(sub.values[static_cast<size_t>(s)]));
    }
    call.num_inputs = static_cast<uint32_t>(call.args.size());
    for (ValueId s : out_subs) {
      call.args.push_back(define(cut.from_sub[static_cast<size_t>(s)]));
      metadata.outputs.push_back(binding(sub.values[static_cast<size_t>(s)]));
    }
    for (const graph::BufferMutation& alias : cut.aliases) {
      metadata.aliases.push_back({sub.values[static_cast<size_t>(alias.updated)].name,
                                  sub.values[static_cast<size_t>(alias.buffer)].name,
                                  format::AliasKind::kKvCacheUpdate});
    }
    metadata.target_device = options_.target_device;
    const partition::Partition& range = plan_.partitions[p];
    metadata.producer = {{"method", method().name},
                         {"partition", p},
                         {"first_node", graph_.nodes[range.first].name},
                         {"last_node", graph_.nodes[range.first + range.count - 1].name}};

    std::string payload;
    try {
      payload = graph::to_json(sub).dump();
    } catch (const std::exception& e) {
      return invalid_argument("lowering: ", where, ": cannot serialize subgraph: ", e.what());
    }
    auto blob = format::write_blob(metadata, std::as_bytes(std::span(payload)));
    if (!blob.ok()) return blob.status().with_context("lowering: " + where);
    KVRT_RETURN_IF_ERROR(assert_blob_matches_call(*blob, call, cut, where));

    out_.delegates.push_back({"engine", method().name, 0, 0});
    out_.blobs.push_back(std::move(blob).value());
    out_.partitions.push_back(
        {method().name, static_cast<size_t>(call.delegate), range.first, range.count});
    method().instructions.emplace_back(std::move(call));
    return Status();
  }

  // Reads the written blob back and checks it against the call, by name (B2/B3) and by
  // identity: the subgraph value behind binding i is the graph value behind argument i.
  Status assert_blob_matches_call(const std::vector<std::byte>& bytes,
                                  const format::DelegateCall& call, const PartitionCut& cut,
                                  const std::string& where) const {
    auto blob = format::read_blob(bytes);
    if (!blob.ok()) return blob.status().with_context("lowering: " + where + ": blob read-back");
    const format::BlobMetadata& metadata = blob->metadata;
    if (metadata.outputs.size() != cut.subgraph.outputs.size() ||
        metadata.aliases.size() != cut.aliases.size()) {
      return internal_error("lowering: ", where, ": blob has ", metadata.outputs.size(),
                            " outputs and ", metadata.aliases.size(), " aliases for ",
                            cut.subgraph.outputs.size(), " engine outputs and ", cut.aliases.size(),
                            " cache updates (B4)");
    }
    std::vector<std::string> names;
    for (ValueIndex v : call.args) names.push_back(out_.method.values[static_cast<size_t>(v)].name);
    KVRT_RETURN_IF_ERROR(check_binding_order(names, call.num_inputs, metadata));
    for (size_t a = 0; a < call.args.size(); ++a) {
      const std::string& name = a < call.num_inputs ? metadata.inputs[a].name
                                                    : metadata.outputs[a - call.num_inputs].name;
      const auto s = cut.subgraph.find_value(name);
      const ValueId g = graph_of_[static_cast<size_t>(call.args[a])];
      if (!s || cut.from_sub[static_cast<size_t>(*s)] != g) {
        return internal_error("lowering: ", where, ": binding ", a, " '", name,
                              "' is not the value of delegate argument ", a, " (B2/B3)");
      }
    }
    return Status();
  }

  Status finish() {
    for (ValueId g : graph_.outputs) {
      const graph::Value& value = value_of(g);
      if (roots_[static_cast<size_t>(g)] >= 0 || value.kind != ValueKind::kIntermediate) {
        return not_supported("method '", method().name, "': output '", value.name,
                             "' must be computed by a node, not a buffer, input or weight");
      }
      // An output stays where its producer wrote it: on a device the caller decides
      // what crosses to the host (the next token's id, or the logits when sampling).
      KVRT_ASSIGN_OR_RETURN(ValueIndex v, use(g, "method outputs"));
      method().outputs.push_back(v);
    }
    for (const graph::BufferMutation& mutation : graph_.mutations) {
      KVRT_ASSIGN_OR_RETURN(ValueIndex v, use(mutation.updated, "method mutations"));
      method().mutations.push_back({value_of(mutation.buffer).name, v});
    }
    for (size_t v = 0; v < method().values.size(); ++v) {
      Storage& storage = method().values[v].storage;
      if (storage.kind == StorageKind::kPlanned && host_touched_[v]) storage.arena = Arena::kHost;
    }
    return plan_memory(method());
  }

  const graph::Graph& graph_;
  const partition::PartitionPlan& plan_;
  const std::map<std::string, Arena>& arenas_;
  size_t delegate_base_;
  const LoweringOptions& options_;
  std::vector<ValueId> roots_;
  std::vector<ValueIndex> primary_;  // graph value -> the method value that holds it now
  std::vector<ValueIndex> staged_;   // graph value -> its host staging value (F3)
  std::vector<ValueId> graph_of_;    // method value -> graph value (-1 for staging)
  std::vector<bool> host_touched_;   // method value -> used by a host kernel or the caller
  std::map<ValueId, ValueIndex> weights_;
  std::set<std::string> names_;
  LoweredMethod out_;
};

}  // namespace

Status check_binding_order(std::span<const std::string> arg_names, size_t num_inputs,
                           const format::BlobMetadata& blob) {
  if (num_inputs != blob.inputs.size() ||
      arg_names.size() != blob.inputs.size() + blob.outputs.size()) {
    return internal_error("lowering: delegate call has ", arg_names.size(), " arguments (",
                          num_inputs, " inputs) but the blob binds ", blob.inputs.size(),
                          " inputs and ", blob.outputs.size(), " outputs");
  }
  for (size_t i = 0; i < arg_names.size(); ++i) {
    const bool input = i < num_inputs;
    const std::string& name = input ? blob.inputs[i].name : blob.outputs[i - num_inputs].name;
    if (name != arg_names[i]) {
      return internal_error("lowering: blob ", input ? "input" : "output", " binding ",
                            input ? i : i - num_inputs, " is '", name, "' but delegate argument ",
                            i, " is '", arg_names[i], "' (", input ? "B2" : "B3",
                            ": bindings must follow the call's order)");
    }
  }
  return Status();
}

Result<LoweredMethod> lower_method(const MethodGraph& method, const partition::PartitionPlan& plan,
                                   const std::map<std::string, format::Arena>& buffer_arenas,
                                   size_t delegate_base, const LoweringOptions& options) {
  return MethodBuilder(method, plan, buffer_arenas, delegate_base, options).run();
}

}  // namespace kvrt::lowering
