// Method execute: run the instruction list over the method's values and count the
// bytes copied per buffer (F2, F3).
#include <variant>

#include "kvrt/runtime/method.h"

namespace kvrt::runtime {

Status Method::check_inputs(std::span<const TensorView> inputs) const {
  if (inputs.size() != spec_->inputs.size()) {
    return invalid_argument("method '", spec_->name, "' takes ", spec_->inputs.size(),
                            " inputs, got ", inputs.size());
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorView& input = inputs[k];
    const format::ValueSpec& value = spec_->values[static_cast<size_t>(spec_->inputs[k])];
    auto fail = [&](const auto&... why) {
      return invalid_argument("method '", spec_->name, "' input '", value.name, "': ", why...);
    };
    if (input.dtype() != value.dtype) {
      return fail("dtype ", dtype_name(input.dtype()), ", expected ", dtype_name(value.dtype));
    }
    bool fits = input.rank() == static_cast<int>(value.shape.size());
    for (int d = 0; fits && d < input.rank(); ++d) {
      const graph::Dim& dim = value.shape[static_cast<size_t>(d)];
      fits = dim.is_dynamic() ? input.dim(d) >= dim.min && input.dim(d) <= dim.max
                              : input.dim(d) == dim.size;
    }
    if (!fits) {
      return fail("shape ", input.shape().to_string(), " is outside ",
                  format::shape_to_string(value.shape));
    }
    if (!input.is_contiguous()) return fail("must be contiguous");
    if (input.data() == nullptr && !input.empty()) return fail("null storage");
    if (!input.device().is_cpu() && !(input.device() == options_.device)) {
      return fail("is on ", input.device().to_string());
    }
  }
  return Status();
}

Status Method::check_output_storage(std::span<const TensorView> outputs) const {
  if (outputs.size() > spec_->outputs.size()) {
    return invalid_argument("method '", spec_->name, "' has ", spec_->outputs.size(),
                            " outputs, got storage for ", outputs.size());
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorView& storage = outputs[k];
    if (storage.data() == nullptr) continue;  // the planned slot
    const size_t v = static_cast<size_t>(spec_->outputs[k]);
    const format::ValueSpec& value = spec_->values[v];
    auto fail = [&](const auto&... why) {
      return invalid_argument("method '", spec_->name, "' output '", value.name,
                              "' storage: ", why...);
    };
    if (storage.dtype() != value.dtype) {
      return fail("dtype ", dtype_name(storage.dtype()), ", expected ", dtype_name(value.dtype));
    }
    if (!(storage.device() == device_of_[v])) {
      return fail("is on ", storage.device().to_string(), ", the output on ",
                  device_of_[v].to_string());
    }
    KVRT_ASSIGN_OR_RETURN(int64_t need, max_shape_[v].numel());
    KVRT_ASSIGN_OR_RETURN(int64_t have, storage.numel());
    if (!storage.is_contiguous() || have < need) {
      return fail("must be contiguous storage of at least ", need, " elements");
    }
  }
  return Status();
}

Status Method::check_steps(const RunOptions& options) const {
  if (options.steps == 1) return Status();
  if (max_steps_ == 1) {
    return not_supported("method '", spec_->name, "' runs one step per call, asked for ",
                         options.steps);
  }
  if (options.steps < 1 || options.steps > max_steps_) {
    return invalid_argument("method '", spec_->name, "': a run of ", options.steps,
                            " steps, it runs 1 to ", max_steps_);
  }
  const size_t k = static_cast<size_t>(step_output_);
  const format::ValueSpec& value = spec_->values[static_cast<size_t>(spec_->outputs[k])];
  Result<int64_t> have = k < options.outputs.size() && options.outputs[k].data() != nullptr
                             ? options.outputs[k].numel()
                             : Result<int64_t>(0);
  if (!have.ok() || *have < options.steps) {
    return invalid_argument("method '", spec_->name, "' output '", value.name, "': a run of ",
                            options.steps, " steps needs caller storage for ", options.steps,
                            " tokens");
  }
  return Status();
}

class Method::OutputOverride {
 public:
  OutputOverride(Method& method, std::span<const TensorView> outputs) : method_(method) {
    saved_.reserve(outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      const size_t v = static_cast<size_t>(method_.spec_->outputs[k]);
      saved_.push_back(method_.base_[v]);
      if (outputs[k].data() != nullptr)
        method_.base_[v] = static_cast<std::byte*>(outputs[k].data());
    }
  }
  ~OutputOverride() {
    for (size_t k = 0; k < saved_.size(); ++k) {
      method_.base_[static_cast<size_t>(method_.spec_->outputs[k])] = saved_[k];
    }
  }
  OutputOverride(const OutputOverride&) = delete;
  OutputOverride& operator=(const OutputOverride&) = delete;

 private:
  Method& method_;
  std::vector<std::byte*> saved_;
};

Result<std::span<const TensorView>> Method::execute(std::span<const TensorView> inputs,
                                                    const RunOptions& options) {
  KVRT_RETURN_IF_ERROR(check_inputs(inputs));
  KVRT_RETURN_IF_ERROR(check_output_storage(options.outputs));
  KVRT_RETURN_IF_ERROR(check_steps(options));
  const OutputOverride output_storage(*this, options.outputs);
  for (size_t v = 0; v < current_.size(); ++v) {
    current_[v] = capacity_view(static_cast<format::ValueIndex>(v));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    current_[static_cast<size_t>(spec_->inputs[k])] = inputs[k];
  }
  std::fill(stats_.buffer_bytes.begin(), stats_.buffer_bytes.end(), 0);
  stats_.copy_instruction_bytes = 0;
  stats_.delegate_bytes = 0;

  for (size_t i = 0; i < spec_->instructions.size(); ++i) {
    const format::Instruction& instruction = spec_->instructions[i];
    Status status;
    if (const auto* call = std::get_if<format::DelegateCall>(&instruction)) {
      status = run_call(i, *call, calls_[i], options.steps);
    } else if (const auto* kernel = std::get_if<format::HostKernel>(&instruction)) {
      status = synchronize();  // its inputs may come from device work
      if (status.ok()) status = run_host_kernel(*kernel, host_ops_[i]);
    } else {
      status = run_copy(std::get<format::CopyInstruction>(instruction));
    }
    if (!status.ok()) {
      (void)synchronize();
      return status.with_context(where(i));
    }
  }
  if (options.synchronize) KVRT_RETURN_IF_ERROR(synchronize());
  outputs_.clear();
  for (format::ValueIndex v : spec_->outputs) outputs_.push_back(current_[static_cast<size_t>(v)]);
  return std::span<const TensorView>(outputs_);
}

Status Method::run_call(size_t, const format::DelegateCall& call, Call& state, int steps) {
  for (size_t k = 0; k < call.args.size(); ++k) {
    const format::ValueIndex v = call.args[k];
    state.args[k] = k < call.num_inputs ? current_[static_cast<size_t>(v)] : capacity_view(v);
  }
  if (steps != 1) {  // the step output holds one token per step (check_steps)
    const size_t k = static_cast<size_t>(state.handle->step_arg());
    const size_t v = static_cast<size_t>(call.args[k]);
    state.args[k] = TensorView(base_[v], spec_->values[v].dtype, {steps, 1}, device_of_[v]);
  }
  delegate::ExecuteOptions options;
  options.stream = stream_;
  options.steps = steps;
  KVRT_RETURN_IF_ERROR(state.handle->execute(state.args, options));
  for (size_t k = call.num_inputs; k < call.args.size(); ++k) {
    current_[static_cast<size_t>(call.args[k])] = state.args[k];  // resized (D5)
  }
  const delegate::ExecuteStats stats = state.handle->last_stats();
  stats_.delegate_bytes += stats.total_bytes();
  for (size_t k = 0; k < call.args.size() && k < stats.arg_bytes.size(); ++k) {
    const int b = buffer_index(call.args[k]);
    if (b >= 0) stats_.buffer_bytes[static_cast<size_t>(b)] += stats.arg_bytes[k];
  }
  return Status();
}

Status Method::run_host_kernel(const format::HostKernel& kernel, const HostOp& op) {
  std::vector<TensorView> in;
  std::vector<engine::cpu::TensorType> types;
  for (format::ValueIndex v : kernel.inputs) {
    in.push_back(current_[static_cast<size_t>(v)]);
    types.push_back({in.back().dtype(), in.back().shape()});
  }
  KVRT_ASSIGN_OR_RETURN(engine::cpu::TensorType out_type, engine::cpu::infer_output(op.op, types));
  const format::ValueIndex out = kernel.outputs[0];
  KVRT_ASSIGN_OR_RETURN(int64_t need, out_type.shape.numel());
  KVRT_ASSIGN_OR_RETURN(int64_t have, max_shape_[static_cast<size_t>(out)].numel());
  if (out_type.dtype != spec_->values[static_cast<size_t>(out)].dtype || need > have) {
    return invalid_argument("host kernel '", kernel.node, "' produces ", dtype_name(out_type.dtype),
                            " ", out_type.shape.to_string(), ", which does not fit value '",
                            spec_->values[static_cast<size_t>(out)].name, "'");
  }
  const TensorView out_view(base_[static_cast<size_t>(out)], out_type.dtype, out_type.shape,
                            Device::cpu());
  KVRT_RETURN_IF_ERROR(engine::cpu::check_op(op.op, in, {&out_view, 1}));
  engine::cpu::run_op(op.op, in, {&out_view, 1}, pool_.get());
  current_[static_cast<size_t>(out)] = out_view;
  return Status();
}

Status Method::run_copy(const format::CopyInstruction& copy) {
  const TensorView& src = current_[static_cast<size_t>(copy.src)];
  KVRT_ASSIGN_OR_RETURN(int64_t src_bytes, src.nbytes());
  KVRT_ASSIGN_OR_RETURN(int64_t dst_bytes, capacity_view(copy.dst).nbytes());
  const int64_t bytes = static_cast<int64_t>(copy.nbytes);
  if (bytes > src_bytes || bytes > dst_bytes) {
    return invalid_program("copy of ", bytes, " bytes exceeds its source (", src_bytes,
                           ") or destination (", dst_bytes, ")");
  }
  KVRT_RETURN_IF_ERROR(api_->copy_async(base_[static_cast<size_t>(copy.dst)], src.data(),
                                        static_cast<size_t>(bytes), stream_));
  const format::ValueSpec& dst_spec = spec_->values[static_cast<size_t>(copy.dst)];
  current_[static_cast<size_t>(copy.dst)] =
      bytes == src_bytes && dst_spec.dtype == src.dtype()
          ? TensorView(base_[static_cast<size_t>(copy.dst)], src.dtype(), src.shape(),
                       device_of_[static_cast<size_t>(copy.dst)])
          : capacity_view(copy.dst);
  stats_.copy_instruction_bytes += bytes;
  const int src_buffer = buffer_index(copy.src), dst_buffer = buffer_index(copy.dst);
  if (src_buffer >= 0) stats_.buffer_bytes[static_cast<size_t>(src_buffer)] += bytes;
  if (dst_buffer >= 0 && dst_buffer != src_buffer) {
    stats_.buffer_bytes[static_cast<size_t>(dst_buffer)] += bytes;
  }
  return Status();
}

Status Method::synchronize() {
  return api_->synchronize(stream_);
}

}  // namespace kvrt::runtime
