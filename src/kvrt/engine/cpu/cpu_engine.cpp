#include "kvrt/engine/cpu/cpu_engine.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "kvrt/engine/cpu/arena_plan.h"
#include "kvrt/engine/cpu/ops.h"
#include "kvrt/engine/cpu/thread_pool.h"

namespace kvrt::engine::cpu {
namespace {

using graph::ValueId;

// Where a value's storage comes from at enqueue.
enum class Source : uint8_t {
  kInput,         // bound by set_tensor (engine input `io`)
  kOutput,        // bound by set_tensor (engine output `io`)
  kWeight,        // the WeightProvider's view
  kIntermediate,  // the scratch arena at `offset`
  kAlias,         // the storage of value `alias_of` (kv_cache_write result)
};

struct Slot {
  Source source = Source::kIntermediate;
  int io = -1;
  int64_t offset = 0;
  ValueId alias_of = -1;
  TensorView weight;
};

struct Step {
  PreparedOp op;
  std::vector<ValueId> inputs;
  ValueId output = -1;
};

struct Binding {
  void* data = nullptr;
  Shape shape;
  bool bound = false;
};

struct FreeDeleter {
  void operator()(std::byte* ptr) const { std::free(ptr); }
};

// A bound input must fit its declared dims (static equal, dynamic within bounds). A
// bound output is storage capacity: static dims equal, dynamic dims any size, the fit
// to the computed shape is checked at enqueue.
Status check_dims(const TensorInfo& info, const Shape& shape, bool is_output) {
  const char* what = is_output ? "output" : "input";
  if (shape.rank() != static_cast<int>(info.shape.size())) {
    return invalid_argument(what, " '", info.name, "' has rank ", shape.rank(), ", expected ",
                            info.shape.size());
  }
  for (int i = 0; i < shape.rank(); ++i) {
    const graph::Dim& dim = info.shape[static_cast<size_t>(i)];
    const bool ok = !dim.is_dynamic() ? shape[i] == dim.size
                    : is_output       ? shape[i] >= 0
                                      : shape[i] >= dim.min && shape[i] <= dim.max;
    if (!ok) {
      return invalid_argument(what, " '", info.name, "' shape ", shape.to_string(),
                              " does not fit dim ", i, " of its declared shape");
    }
  }
  return Status();
}

Shape max_shape(const std::vector<graph::Dim>& dims) {
  Shape shape;
  std::vector<int64_t> sizes;
  for (const graph::Dim& dim : dims) sizes.push_back(dim.is_dynamic() ? dim.max : dim.size);
  Result<Shape> result = Shape::from_span(sizes);
  return result.ok() ? *result : shape;
}

class CpuEngine final : public Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const graph::Graph& graph,
                                                const WeightProvider& weights,
                                                const EngineOptions& options);

  Device device() const override { return Device::cpu(); }
  std::span<const TensorInfo> inputs() const override { return inputs_; }
  std::span<const TensorInfo> outputs() const override { return outputs_; }
  std::optional<std::string> aliased_input(std::string_view output_name) const override;
  Status set_tensor(std::string_view name, void* data, const Shape& shape) override;
  Status set_tensor(int index, void* data, const Shape& shape) override;
  Status enqueue(StreamHandle stream) override;
  int max_steps() const override { return step_output_ >= 0 ? kMaxSteps : 1; }
  int step_output() const override { return step_output_; }
  Status enqueue_steps(StreamHandle stream, int steps) override;
  Result<Shape> output_shape(std::string_view name) const override;

 private:
  // A run of steps is a loop of calls here; the bound is what the runtime queues.
  static constexpr int kMaxSteps = 16;

  Status assign_sources(const graph::Graph& graph, const WeightProvider& weights);
  Status plan_intermediates(const graph::Graph& graph);
  void find_step_roles();
  Status prepare_views();
  Status check_all();  // views for the bindings, then every op's checks; writes nothing
  void run_all();
  TensorView& view(ValueId id) { return views_[static_cast<size_t>(id)]; }

  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<ValueId> input_values_, output_values_;
  std::vector<int> output_alias_;  // per output: aliased input index or -1
  // Runs of steps: the token input, the position input and the argmax output, or -1.
  int step_tokens_ = -1, step_position_ = -1, step_output_ = -1;
  std::vector<Binding> input_bindings_, output_bindings_;
  std::vector<Shape> output_shapes_;  // after the last enqueue
  std::vector<DType> dtypes_;         // per value
  std::vector<Slot> slots_;           // per value
  std::vector<Step> steps_;
  std::vector<TensorView> views_;          // per value, rebuilt at each enqueue
  std::vector<TensorType> scratch_types_;  // reused by enqueue: no per-call allocation
  std::vector<TensorView> scratch_inputs_;
  std::unique_ptr<std::byte, FreeDeleter> arena_;
  std::shared_ptr<ThreadPool> pool_;
};

Result<std::unique_ptr<Engine>> CpuEngine::create(const graph::Graph& graph,
                                                  const WeightProvider& weights,
                                                  const EngineOptions& options) {
  if (!options.device.is_cpu()) {
    return invalid_argument("the CPU engine cannot run on ", options.device.to_string());
  }
  auto engine = std::make_unique<CpuEngine>();
  const auto in_range = [&](ValueId id) {
    return id >= 0 && static_cast<size_t>(id) < graph.values.size();
  };
  auto all_in_range = [&](const std::vector<ValueId>& ids) {
    return std::all_of(ids.begin(), ids.end(), in_range);
  };
  bool mutations_ok = true;
  for (const graph::BufferMutation& m : graph.mutations) {
    mutations_ok = mutations_ok && in_range(m.buffer) && in_range(m.updated);
  }
  if (!all_in_range(graph.inputs) || !all_in_range(graph.outputs) || !mutations_ok) {
    return invalid_program("subgraph inputs, outputs or mutations name a value out of range");
  }
  for (const graph::Node& node : graph.nodes) {
    if (!std::all_of(node.inputs.begin(), node.inputs.end(), in_range) ||
        !std::all_of(node.outputs.begin(), node.outputs.end(), in_range)) {
      return invalid_program("node '", node.name, "' names a value id out of range");
    }
    KVRT_ASSIGN_OR_RETURN(PreparedOp op, prepare_op(node.op, node.name, node.attributes));
    if (!op_arity_ok(op.kind, node.inputs.size(), node.outputs.size())) {
      return invalid_program("node '", node.name, "' (", node.op, ") has ", node.inputs.size(),
                             " inputs and ", node.outputs.size(), " outputs");
    }
    engine->steps_.push_back({std::move(op), node.inputs, node.outputs[0]});
  }
  KVRT_RETURN_IF_ERROR(engine->assign_sources(graph, weights));
  KVRT_RETURN_IF_ERROR(engine->plan_intermediates(graph));
  engine->find_step_roles();
  engine->pool_ = shared_thread_pool(options.num_threads);
  return std::unique_ptr<Engine>(std::move(engine));
}

Status CpuEngine::assign_sources(const graph::Graph& graph, const WeightProvider& weights) {
  const size_t n = graph.values.size();
  slots_.assign(n, Slot{});
  views_.assign(n, TensorView{});
  dtypes_.resize(n);
  std::vector<bool> assigned(n, false);
  for (size_t v = 0; v < n; ++v) dtypes_[v] = graph.values[v].dtype;
  auto value_name = [&](ValueId id) { return graph.values[static_cast<size_t>(id)].name; };

  for (ValueId id : graph.inputs) {
    const graph::Value& value = graph.values[static_cast<size_t>(id)];
    if (value.kind != graph::ValueKind::kInput && value.kind != graph::ValueKind::kBuffer) {
      return invalid_program("subgraph input '", value.name, "' is not an input or buffer");
    }
    slots_[static_cast<size_t>(id)] = {Source::kInput, static_cast<int>(inputs_.size())};
    assigned[static_cast<size_t>(id)] = true;
    input_values_.push_back(id);
    inputs_.push_back({value.name, value.dtype, value.shape});
  }
  for (size_t v = 0; v < n; ++v) {
    const graph::Value& value = graph.values[v];
    if (value.kind != graph::ValueKind::kParameter) continue;
    Result<TensorView> view = weights.weight(value.name);
    if (!view.ok()) return view.status().with_context("parameter '" + value.name + "'");
    if (view->dtype() != value.dtype || !(view->shape() == max_shape(value.shape)) ||
        !view->is_contiguous()) {
      return invalid_program("weight '", value.name, "' is ", dtype_name(view->dtype()), " ",
                             view->shape().to_string(), ", the graph expects ",
                             dtype_name(value.dtype), " ", max_shape(value.shape).to_string());
    }
    slots_[v] = {Source::kWeight, -1, 0, -1, *view};
    assigned[v] = true;
  }
  // Results of kv_cache_write are their cache's storage; follow chains to the root.
  for (const Step& step : steps_) {
    if (step.op.kind != OpKind::kKvCacheWrite) continue;
    ValueId cache = step.inputs[0];
    if (slots_[static_cast<size_t>(cache)].source == Source::kAlias) {
      cache = slots_[static_cast<size_t>(cache)].alias_of;
    }
    if (slots_[static_cast<size_t>(cache)].source != Source::kInput) {
      return invalid_program("kv_cache_write node '", step.op.node, "' writes '",
                             value_name(step.inputs[0]), "', which is not a subgraph input");
    }
    slots_[static_cast<size_t>(step.output)] = {Source::kAlias, -1, 0, cache};
    assigned[static_cast<size_t>(step.output)] = true;
  }
  // Outputs: the user outputs, then buffer mutations not already listed.
  std::vector<ValueId> outputs = graph.outputs;
  for (const graph::BufferMutation& mutation : graph.mutations) {
    if (std::find(outputs.begin(), outputs.end(), mutation.updated) == outputs.end()) {
      outputs.push_back(mutation.updated);
    }
  }
  for (ValueId id : outputs) {
    Slot& slot = slots_[static_cast<size_t>(id)];
    const graph::Value& value = graph.values[static_cast<size_t>(id)];
    if (std::find(output_values_.begin(), output_values_.end(), id) != output_values_.end()) {
      return invalid_program("subgraph output '", value.name, "' is listed twice");
    }
    int alias = -1;
    if (slot.source == Source::kAlias) {
      alias = slots_[static_cast<size_t>(slot.alias_of)].io;
    } else if (assigned[static_cast<size_t>(id)]) {
      return not_supported("subgraph output '", value.name, "' is an input or a weight");
    } else {
      slot = {Source::kOutput, static_cast<int>(outputs_.size())};
      assigned[static_cast<size_t>(id)] = true;
    }
    output_values_.push_back(id);
    output_alias_.push_back(alias);
    outputs_.push_back({value.name, value.dtype, value.shape});
  }
  // Every value a node reads exists by the time it runs.
  std::vector<bool> ready(n, false);
  for (size_t v = 0; v < n; ++v) {
    ready[v] = slots_[v].source == Source::kInput || slots_[v].source == Source::kWeight;
  }
  for (const Step& step : steps_) {
    for (ValueId in : step.inputs) {
      if (!ready[static_cast<size_t>(in)]) {
        return invalid_program("node '", step.op.node, "' reads '", value_name(in),
                               "', which is not an input, weight or earlier result");
      }
    }
    ready[static_cast<size_t>(step.output)] = true;
  }
  // Every in-place write must be visible as an output (B4: no alias silently dropped).
  for (const Step& step : steps_) {
    if (step.op.kind == OpKind::kKvCacheWrite &&
        std::find(output_values_.begin(), output_values_.end(), step.output) ==
            output_values_.end()) {
      return invalid_program("kv_cache_write node '", step.op.node, "' updates '",
                             value_name(step.inputs[0]), "' but its result '",
                             value_name(step.output), "' is not a subgraph output");
    }
  }
  input_bindings_.assign(inputs_.size(), Binding{});
  output_bindings_.assign(outputs_.size(), Binding{});
  output_shapes_.assign(outputs_.size(), Shape{});
  return Status();
}

Status CpuEngine::plan_intermediates(const graph::Graph& graph) {
  // Shape inference at the largest shapes: validates the graph and sizes the arena.
  std::vector<Shape> shapes(graph.values.size());
  for (size_t v = 0; v < graph.values.size(); ++v) {
    shapes[v] = slots_[v].source == Source::kWeight ? slots_[v].weight.shape()
                                                    : max_shape(graph.values[v].shape);
  }
  std::vector<ArenaRequest> requests;
  std::vector<ValueId> requested;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    std::vector<TensorType> types;
    for (ValueId in : step.inputs) types.push_back({dtypes_[in], shapes[in]});
    KVRT_ASSIGN_OR_RETURN(TensorType out, infer_output(step.op, types));
    const graph::Value& declared = graph.values[static_cast<size_t>(step.output)];
    if (out.dtype != declared.dtype || !(out.shape == shapes[step.output])) {
      return invalid_program("node '", step.op.node, "' produces ", dtype_name(out.dtype), " ",
                             out.shape.to_string(), " but '", declared.name, "' is declared ",
                             dtype_name(declared.dtype), " ", shapes[step.output].to_string(),
                             " (largest shape)");
    }
    if (slots_[step.output].source != Source::kIntermediate) continue;
    KVRT_ASSIGN_OR_RETURN(int64_t numel, out.shape.numel());
    int64_t bytes;
    if (!checked_mul(numel, static_cast<int64_t>(dtype_size(out.dtype)), &bytes)) {
      return invalid_program("value '", declared.name, "' is too large");
    }
    int64_t last = static_cast<int64_t>(s);
    for (size_t later = s + 1; later < steps_.size(); ++later) {
      for (ValueId in : steps_[later].inputs) {
        if (in == step.output) last = static_cast<int64_t>(later);
      }
    }
    requests.push_back({static_cast<int64_t>(s), last, bytes});
    requested.push_back(step.output);
  }
  ArenaPlan plan = plan_arena(requests);
  for (size_t i = 0; i < requested.size(); ++i) {
    slots_[static_cast<size_t>(requested[i])].offset = plan.offsets[i];
  }
  if (plan.total_bytes > 0) {
    void* memory = std::aligned_alloc(kArenaAlignment, static_cast<size_t>(plan.total_bytes));
    if (memory == nullptr) {
      return allocation_failed("CPU engine scratch arena of ", plan.total_bytes, " bytes");
    }
    arena_.reset(static_cast<std::byte*>(memory));
  }
  return Status();
}

// A graph that runs in steps: one embedding reads a tokens input, one other i32 [1]
// input is the position, and an argmax writes a [1, 1] output, the next token.
void CpuEngine::find_step_roles() {
  auto input_index = [&](ValueId id) {
    const auto found = std::find(input_values_.begin(), input_values_.end(), id);
    return found == input_values_.end() ? -1 : static_cast<int>(found - input_values_.begin());
  };
  int tokens = -1, position = -1, next = -1;
  for (const Step& step : steps_) {
    if (step.op.kind == OpKind::kEmbedding) {
      if (tokens >= 0) return;
      tokens = input_index(step.inputs[0]);
    } else if (step.op.kind == OpKind::kArgmax) {
      const auto found = std::find(output_values_.begin(), output_values_.end(), step.output);
      if (next >= 0 || found == output_values_.end()) return;
      next = static_cast<int>(found - output_values_.begin());
    }
  }
  const std::vector<graph::Dim> one_id = {graph::Dim::fixed(1), graph::Dim::fixed(1)};
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const bool scalar = inputs_[i].dtype == DType::kI32 && inputs_[i].shape.size() == 1 &&
                        !inputs_[i].shape[0].is_dynamic() && inputs_[i].shape[0].size == 1;
    if (!scalar) continue;
    if (position >= 0) return;
    position = static_cast<int>(i);
  }
  if (tokens < 0 || position < 0 || next < 0 || tokens == position ||
      inputs_[static_cast<size_t>(tokens)].dtype != DType::kI32 ||
      outputs_[static_cast<size_t>(next)].dtype != DType::kI32 ||
      outputs_[static_cast<size_t>(next)].shape != one_id) {
    return;
  }
  step_tokens_ = tokens;
  step_position_ = position;
  step_output_ = next;
}

std::optional<std::string> CpuEngine::aliased_input(std::string_view output_name) const {
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (outputs_[o].name == output_name && output_alias_[o] >= 0) {
      return inputs_[static_cast<size_t>(output_alias_[o])].name;
    }
  }
  return std::nullopt;
}

Status CpuEngine::set_tensor(std::string_view name, void* data, const Shape& shape) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].name == name) return set_tensor(static_cast<int>(i), data, shape);
  }
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (outputs_[o].name == name) {
      return set_tensor(static_cast<int>(inputs_.size() + o), data, shape);
    }
  }
  return not_found("the engine has no tensor named '", name, "'");
}

Status CpuEngine::set_tensor(int index, void* data, const Shape& shape) {
  const size_t n = inputs_.size();
  const auto i = static_cast<size_t>(index);
  if (index < 0 || i >= n + outputs_.size()) {
    return invalid_argument("the engine has no tensor ", index);
  }
  const bool is_output = i >= n;
  const TensorInfo& info = is_output ? outputs_[i - n] : inputs_[i];
  KVRT_RETURN_IF_ERROR(check_dims(info, shape, is_output));
  KVRT_ASSIGN_OR_RETURN(int64_t numel, shape.numel());
  if (data == nullptr && numel != 0) {
    return invalid_argument("tensor '", info.name, "' has null storage");
  }
  (is_output ? output_bindings_[i - n] : input_bindings_[i]) = {data, shape, true};
  return Status();
}

// Builds the view of every value for the bound inputs: shapes flow through the ops;
// outputs must fit their bound capacity. Writes nothing.
Status CpuEngine::prepare_views() {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Binding& binding = input_bindings_[i];
    if (!binding.bound) return invalid_state("input '", inputs_[i].name, "' is not bound");
    view(input_values_[i]) = TensorView(binding.data, inputs_[i].dtype, binding.shape);
  }
  for (size_t o = 0; o < outputs_.size(); ++o) {
    const Binding& binding = output_bindings_[o];
    if (!binding.bound) return invalid_state("output '", outputs_[o].name, "' is not bound");
    if (output_alias_[o] >= 0 &&
        binding.data != input_bindings_[static_cast<size_t>(output_alias_[o])].data) {
      return invalid_argument("aliased output '", outputs_[o].name,
                              "' must be bound to the storage of input '",
                              inputs_[static_cast<size_t>(output_alias_[o])].name, "'");
    }
  }
  for (size_t v = 0; v < slots_.size(); ++v) {
    if (slots_[v].source == Source::kWeight) views_[v] = slots_[v].weight;
  }
  std::vector<TensorType>& types = scratch_types_;
  for (const Step& step : steps_) {
    types.clear();
    for (ValueId in : step.inputs) types.push_back({dtypes_[in], view(in).shape()});
    KVRT_ASSIGN_OR_RETURN(TensorType out, infer_output(step.op, types));
    const Slot& slot = slots_[static_cast<size_t>(step.output)];
    switch (slot.source) {
      case Source::kAlias:
        view(step.output) = view(slot.alias_of);
        break;
      case Source::kOutput: {
        const Binding& binding = output_bindings_[static_cast<size_t>(slot.io)];
        KVRT_ASSIGN_OR_RETURN(int64_t need, out.shape.numel());
        KVRT_ASSIGN_OR_RETURN(int64_t have, binding.shape.numel());
        if (out.shape.rank() != binding.shape.rank() || need > have) {
          return invalid_argument("output '", outputs_[static_cast<size_t>(slot.io)].name,
                                  "' of shape ", out.shape.to_string(),
                                  " does not fit its storage ", binding.shape.to_string());
        }
        view(step.output) = TensorView(binding.data, out.dtype, out.shape);
        break;
      }
      default:
        view(step.output) = TensorView(arena_.get() + slot.offset, out.dtype, out.shape);
        break;
    }
  }
  return Status();
}

Status CpuEngine::check_all() {
  KVRT_RETURN_IF_ERROR(prepare_views());
  std::vector<TensorView>& in = scratch_inputs_;
  for (const Step& step : steps_) {
    in.clear();
    for (ValueId id : step.inputs) in.push_back(view(id));
    KVRT_RETURN_IF_ERROR(check_op(step.op, in, {&view(step.output), 1}));
  }
  return Status();
}

void CpuEngine::run_all() {
  std::vector<TensorView>& in = scratch_inputs_;
  for (const Step& step : steps_) {
    in.clear();
    for (ValueId id : step.inputs) in.push_back(view(id));
    run_op(step.op, in, {&view(step.output), 1}, pool_.get());
  }
  for (size_t o = 0; o < outputs_.size(); ++o) output_shapes_[o] = view(output_values_[o]).shape();
}

Status CpuEngine::enqueue(StreamHandle) {
  // All checks first, so a failing call writes nothing (no partial cache update).
  KVRT_RETURN_IF_ERROR(check_all());
  run_all();
  return Status();
}

Status CpuEngine::enqueue_steps(StreamHandle stream, int steps) {
  if (steps == 1) return enqueue(stream);
  if (steps < 1 || steps > max_steps()) {
    return invalid_argument("a run of ", steps, " steps: this engine runs 1 to ", max_steps());
  }
  Binding& tokens = input_bindings_[static_cast<size_t>(step_tokens_)];
  Binding& position = input_bindings_[static_cast<size_t>(step_position_)];
  Binding& out = output_bindings_[static_cast<size_t>(step_output_)];
  if (!tokens.bound || !position.bound || !out.bound) {
    return invalid_state("a run of steps needs its token, position and output bound");
  }
  if (tokens.shape != Shape{1, 1}) {
    return invalid_argument("a run of steps starts from one token; input '",
                            inputs_[static_cast<size_t>(step_tokens_)].name, "' is ",
                            tokens.shape.to_string());
  }
  const Binding saved_tokens = tokens, saved_position = position, saved_out = out;
  auto restore = [&] {
    tokens = saved_tokens;
    position = saved_position;
    out = saved_out;
  };
  const int64_t first = *static_cast<const int32_t*>(saved_position.data);
  if (first + steps - 1 > INT32_MAX) {
    return invalid_argument("a run of ", steps, " steps from position ", first,
                            " passes the largest position");
  }
  // The first and the last call are where a position can fall outside the cache; the
  // tokens after the first come from the argmax, inside the vocabulary.
  int32_t at = static_cast<int32_t>(first + steps - 1);
  position.data = &at;
  Status checked = check_all();
  if (checked.ok()) {
    at = static_cast<int32_t>(first);
    checked = check_all();
  }
  if (!checked.ok()) {
    restore();
    return checked;
  }
  auto* ids = static_cast<int32_t*>(saved_out.data);
  for (int i = 0; i < steps; ++i) {
    at = static_cast<int32_t>(first + i);
    tokens.data = i == 0 ? saved_tokens.data : ids + i - 1;
    out.data = ids + i;
    checked = check_all();
    if (!checked.ok()) break;  // not reached: the checks above cover every call
    run_all();
  }
  restore();
  return checked;
}

Result<Shape> CpuEngine::output_shape(std::string_view name) const {
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (outputs_[o].name == name) return output_shapes_[o];
  }
  return not_found("the engine has no output named '", name, "'");
}

}  // namespace

Result<std::unique_ptr<Engine>> build_cpu_engine(const graph::Graph& graph,
                                                 const WeightProvider& weights,
                                                 const EngineOptions& options) {
  return CpuEngine::create(graph, weights, options);
}

Result<std::unique_ptr<Engine>> build_cpu_engine(std::span<const std::byte> payload,
                                                 const WeightProvider& weights,
                                                 const EngineOptions& options) {
  const std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
  // graph_from_json_text validates the graph too.
  KVRT_ASSIGN_OR_RETURN(graph::Graph graph, graph::graph_from_json_text(text, "engine payload"));
  return CpuEngine::create(graph, weights, options);
}

EngineTarget cpu_engine_target() {
  EngineTarget target;
  target.name = "cpu";
  target.device_type = DeviceType::kCpu;
  target.build = [](std::span<const std::byte> payload, const WeightProvider& weights,
                    const EngineOptions& options) {
    return build_cpu_engine(payload, weights, options);
  };
  target.device_api = [](int index) -> Result<DeviceApi*> {
    if (index != 0) return invalid_argument("there is no cpu:", index);
    return &host_device_api();
  };
  return target;
}

}  // namespace kvrt::engine::cpu
