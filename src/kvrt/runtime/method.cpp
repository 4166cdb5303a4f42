// Method load: storage for every value, delegates initialized and checked against the
// program's argument order, host kernels prepared. Execute is in method_execute.cpp.
#include "kvrt/runtime/method.h"

#include <variant>

#include "kvrt/core/log.h"
#include "kvrt/delegate/engine_delegate.h"

namespace kvrt::runtime {
namespace {

Result<Shape> largest_shape(const std::vector<graph::Dim>& dims) {
  std::vector<int64_t> sizes;
  for (const graph::Dim& dim : dims) sizes.push_back(dim.is_dynamic() ? dim.max : dim.size);
  return Shape::from_span(sizes);
}

const char* instruction_kind(const format::Instruction& instruction) {
  if (std::holds_alternative<format::DelegateCall>(instruction)) return "delegate_call";
  if (std::holds_alternative<format::HostKernel>(instruction)) return "host_kernel";
  return "copy";
}

}  // namespace

int64_t StepStats::total_buffer_bytes() const {
  int64_t total = 0;
  for (int64_t bytes : buffer_bytes) total += bytes;
  return total;
}

int64_t StepStats::bytes_for(std::string_view buffer) const {
  for (size_t b = 0; b < buffer_names.size(); ++b) {
    if (buffer_names[b] == buffer) return buffer_bytes[b];
  }
  return 0;
}

Result<std::unique_ptr<Method>> Method::load(std::shared_ptr<const Program> program,
                                             std::string_view name, BufferSet& buffers,
                                             const MethodOptions& options) {
  const format::MethodSpec* spec = program->find_method(name);
  if (spec == nullptr) return not_found("program has no method '", name, "'");
  auto method = std::make_unique<Method>();
  method->program_ = std::move(program);
  method->spec_ = spec;
  method->buffers_ = &buffers;
  method->options_ = options;
  method->pool_ = engine::cpu::shared_thread_pool(options.num_threads);
  for (const BufferSet::Buffer& buffer : buffers.buffers()) {
    method->stats_.buffer_names.push_back(buffer.name);
  }
  method->stats_.buffer_bytes.assign(method->stats_.buffer_names.size(), 0);
  KVRT_RETURN_IF_ERROR(method->init_storage());
  KVRT_RETURN_IF_ERROR(method->init_instructions());
  return method;
}

Method::~Method() {
  if (api_ == nullptr) return;
  (void)synchronize();
  calls_.clear();  // delegates drain their own work before the stream goes
  if (owns_stream_ && stream_ != nullptr) api_->destroy_stream(stream_);
}

std::string Method::where(size_t instruction) const {
  return "method '" + spec_->name + "' instruction " + std::to_string(instruction) + " (" +
         instruction_kind(spec_->instructions[instruction]) + ")";
}

Status Method::init_storage() {
  KVRT_ASSIGN_OR_RETURN(api_, delegate::device_api_for(options_.device));
  if (options_.stream != nullptr) {
    stream_ = options_.stream;
  } else {
    KVRT_ASSIGN_OR_RETURN(stream_, api_->create_stream());
    owns_stream_ = stream_ != nullptr;
  }
  KVRT_ASSIGN_OR_RETURN(device_arena_, Allocation::create(spec_->device_arena_bytes, api_));
  // The host arena holds what the caller reads (logits) and the delegate stages: pinned
  // where the engine is a device, so those copies run at full speed.
  KVRT_ASSIGN_OR_RETURN(host_arena_, options_.device.is_cpu()
                                         ? Allocation::create(spec_->host_arena_bytes, nullptr)
                                         : Allocation::create_host(spec_->host_arena_bytes, *api_));
  const size_t n = spec_->values.size();
  base_.assign(n, nullptr);
  device_of_.assign(n, Device::cpu());
  max_shape_.assign(n, Shape{});
  buffer_of_.assign(n, -1);
  current_.assign(n, TensorView{});
  for (size_t v = 0; v < n; ++v) {
    const format::ValueSpec& value = spec_->values[v];
    const std::string what = "method '" + spec_->name + "' value '" + value.name + "'";
    Result<Shape> shape = largest_shape(value.shape);
    if (!shape.ok()) return shape.status().with_context(what);
    max_shape_[v] = *shape;
    KVRT_ASSIGN_OR_RETURN(int64_t numel, shape->numel());
    const uint64_t bytes = static_cast<uint64_t>(numel) * dtype_size(value.dtype);
    const format::Storage& storage = value.storage;
    switch (storage.kind) {
      case format::StorageKind::kInput:
        break;
      case format::StorageKind::kPlanned: {
        const bool on_device = storage.arena == format::Arena::kDevice;
        const Allocation& arena = on_device ? device_arena_ : host_arena_;
        if (storage.offset + bytes > arena.size() || bytes > storage.nbytes) {
          return invalid_program(what, ": planned slot [", storage.offset, ", +", storage.nbytes,
                                 ") does not hold ", bytes, " bytes in a ", arena.size(),
                                 "-byte arena");
        }
        base_[v] = arena.data() + storage.offset;
        device_of_[v] = on_device ? options_.device : Device::cpu();
        break;
      }
      case format::StorageKind::kBuffer: {
        const std::span<const BufferSet::Buffer> all = buffers_->buffers();
        const BufferSet::Buffer* buffer = buffers_->find(storage.name);
        if (buffer == nullptr || buffer->dtype != value.dtype || !(buffer->shape == *shape)) {
          return invalid_program(what, ": buffer '", storage.name,
                                 "' is missing or has another dtype or shape");
        }
        base_[v] = buffer->storage.data();
        device_of_[v] = buffer->device;
        buffer_of_[v] = static_cast<int>(buffer - all.data());
        break;
      }
      case format::StorageKind::kWeight: {
        Result<TensorView> weight = program_->weight(storage.name);
        if (!weight.ok()) return weight.status().with_context(what);
        if (weight->dtype() != value.dtype || !(weight->shape() == *shape)) {
          return invalid_program(what, ": weight '", storage.name, "' has another dtype or shape");
        }
        base_[v] = static_cast<std::byte*>(weight->data());
        break;
      }
    }
    current_[v] = capacity_view(static_cast<format::ValueIndex>(v));
  }
  return Status();
}

Status Method::init_instructions() {
  const size_t count = spec_->instructions.size();
  calls_.resize(count);
  host_ops_.resize(count);
  delegate::DelegateOptions delegate_options;
  delegate_options.device = options_.device;
  delegate_options.num_threads = options_.num_threads;
  for (size_t i = 0; i < count; ++i) {
    const format::Instruction& instruction = spec_->instructions[i];
    if (const auto* call = std::get_if<format::DelegateCall>(&instruction)) {
      const format::DelegateSpec& delegate =
          program_->spec().delegates[static_cast<size_t>(call->delegate)];
      Result<std::shared_ptr<const delegate::Backend>> backend =
          delegate::find_backend(delegate.backend);
      if (!backend.ok()) return backend.status().with_context(where(i));
      Result<std::unique_ptr<delegate::DelegateHandle>> handle = (*backend)->init(
          program_->blob(static_cast<size_t>(call->delegate)), *program_, delegate_options);
      if (!handle.ok()) return handle.status().with_context(where(i));
      // A3: argument k is binding k. A blob written in another order would bind the
      // wrong storage silently; refuse it here, before any execute.
      const format::BlobMetadata& sig = (*handle)->signature();
      if (call->num_inputs != sig.inputs.size() ||
          call->args.size() != sig.inputs.size() + sig.outputs.size()) {
        return invalid_program(where(i), ": ", call->args.size(), " arguments (", call->num_inputs,
                               " inputs) but the blob has ", sig.inputs.size(), " inputs and ",
                               sig.outputs.size(), " outputs");
      }
      for (size_t k = 0; k < call->args.size(); ++k) {
        const std::string& value = spec_->values[static_cast<size_t>(call->args[k])].name;
        const std::string& binding =
            k < sig.inputs.size() ? sig.inputs[k].name : sig.outputs[k - sig.inputs.size()].name;
        if (value != binding) {
          return invalid_program(where(i), ": argument ", k, " is value '", value,
                                 "' but blob binding ", k, " is '", binding,
                                 "' (the blob's bindings are not in call order)");
        }
      }
      calls_[i].handle = std::move(handle).value();
      calls_[i].args.resize(call->args.size());
    } else if (const auto* kernel = std::get_if<format::HostKernel>(&instruction)) {
      Result<engine::cpu::PreparedOp> op =
          engine::cpu::prepare_op(kernel->op, kernel->node, kernel->attributes);
      if (!op.ok()) return op.status().with_context(where(i));
      if (!engine::cpu::op_arity_ok(op->kind, kernel->inputs.size(), kernel->outputs.size())) {
        return invalid_program(where(i), ": wrong number of inputs or outputs for '", kernel->op,
                               "'");
      }
      for (const std::vector<format::ValueIndex>* list : {&kernel->inputs, &kernel->outputs}) {
        for (format::ValueIndex v : *list) {
          const bool host = device_of_[static_cast<size_t>(v)].is_cpu();
          if (!host) {
            return invalid_program(where(i), ": host kernel '", kernel->node, "' touches '",
                                   spec_->values[static_cast<size_t>(v)].name,
                                   "', which is device memory");
          }
        }
      }
      host_ops_[i].op = std::move(op).value();
    }
  }
  find_step_output();
  return Status();
}

// Runs of steps reach the engine only through a method that is one delegate call whose
// step argument is a method output: nothing else may run between the steps.
void Method::find_step_output() {
  if (calls_.size() != 1 || calls_[0].handle == nullptr) return;
  const int arg = calls_[0].handle->step_arg();
  if (arg < 0 || calls_[0].handle->max_steps() <= 1) return;
  const auto& call = std::get<format::DelegateCall>(spec_->instructions[0]);
  const format::ValueIndex value = call.args[static_cast<size_t>(arg)];
  for (size_t k = 0; k < spec_->outputs.size(); ++k) {
    if (spec_->outputs[k] != value) continue;
    step_output_ = static_cast<int>(k);
    max_steps_ = calls_[0].handle->max_steps();
  }
}

TensorView Method::capacity_view(format::ValueIndex v) const {
  const size_t index = static_cast<size_t>(v);
  return TensorView(base_[index], spec_->values[index].dtype, max_shape_[index], device_of_[index]);
}

int Method::buffer_index(format::ValueIndex v) const {
  return buffer_of_[static_cast<size_t>(v)];
}

}  // namespace kvrt::runtime
