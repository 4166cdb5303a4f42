#include "kvrt/runtime/module.h"

#include "kvrt/delegate/engine_delegate.h"

namespace kvrt::runtime {

Result<std::unique_ptr<Module>> Module::load(const std::string& path,
                                             const ModuleOptions& options) {
  KVRT_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, Program::load(path));
  return create(std::move(program), options);
}

Result<std::unique_ptr<Module>> Module::create(std::shared_ptr<const Program> program,
                                               const ModuleOptions& options) {
  auto module = std::make_unique<Module>();
  module->program_ = std::move(program);
  KVRT_ASSIGN_OR_RETURN(engine::DeviceApi * api, delegate::device_api_for(options.device));
  KVRT_ASSIGN_OR_RETURN(module->buffers_,
                        BufferSet::create(module->program_->spec(), *api, options.device));
  MethodOptions method_options;
  method_options.device = options.device;
  method_options.num_threads = options.num_threads;
  for (const format::MethodSpec& spec : module->program_->spec().methods) {
    KVRT_ASSIGN_OR_RETURN(
        std::unique_ptr<Method> method,
        Method::load(module->program_, spec.name, *module->buffers_, method_options));
    module->methods_.push_back(std::move(method));
  }
  // Vocabulary from the first method's first output (logits [1, vocab]); capacity from
  // the caches ([kv_heads, max_seq, head_dim]).
  for (const auto& method : module->methods_) {
    const format::MethodSpec& spec = method->spec();
    if (spec.outputs.empty()) continue;
    const format::ValueSpec& logits = spec.values[static_cast<size_t>(spec.outputs[0])];
    if (logits.dtype == DType::kF32 && logits.shape.size() == 2) {
      module->vocab_size_ = logits.shape[1].size;
      break;
    }
  }
  for (const BufferSet::Buffer& buffer : module->buffers_->buffers()) {
    if (buffer.shape.rank() == 3) {
      module->max_seq_len_ = buffer.shape[1];
      break;
    }
  }
  return module;
}

Method* Module::method(std::string_view name) {
  for (auto& method : methods_) {
    if (method->spec().name == name) return method.get();
  }
  return nullptr;
}

std::vector<std::string> Module::method_names() const {
  std::vector<std::string> names;
  for (const auto& method : methods_) names.push_back(method->spec().name);
  return names;
}

Result<int64_t> Module::max_tokens(std::string_view name) const {
  for (const auto& method : methods_) {
    const format::MethodSpec& spec = method->spec();
    if (spec.name != name) continue;
    if (spec.inputs.empty()) break;
    const format::ValueSpec& tokens = spec.values[static_cast<size_t>(spec.inputs[0])];
    if (tokens.shape.size() != 2) break;
    return tokens.shape[1].is_dynamic() ? tokens.shape[1].max : tokens.shape[1].size;
  }
  return not_found("no method '", name, "' with a tokens input [1, T]");
}

Result<std::span<const float>> Module::run(std::string_view name, std::span<const int32_t> tokens,
                                           int32_t position) {
  Method* target = method(name);
  if (target == nullptr) return not_found("program has no method '", name, "'");
  // A device engine reads ids and positions from device memory, where it cannot check
  // them without a sync: refuse bad ones here, before anything runs.
  if (position < 0 ||
      (max_seq_len_ > 0 &&
       static_cast<int64_t>(position) + static_cast<int64_t>(tokens.size()) > max_seq_len_)) {
    return invalid_argument(
        "method '", name, "': positions ", position, "..",
        static_cast<int64_t>(position) + static_cast<int64_t>(tokens.size()) - 1,
        " do not fit the cache of ", max_seq_len_, " positions");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || (vocab_size_ > 0 && tokens[i] >= vocab_size_)) {
      return invalid_argument("method '", name, "': token id ", tokens[i], " (index ", i,
                              ") is outside the vocabulary of ", vocab_size_);
    }
  }
  int32_t position_storage = position;
  const TensorView inputs[] = {TensorView(const_cast<int32_t*>(tokens.data()), DType::kI32,
                                          {1, static_cast<int64_t>(tokens.size())}),
                               TensorView(&position_storage, DType::kI32, {1})};
  last_ = target;
  KVRT_ASSIGN_OR_RETURN(std::span<const TensorView> outputs, target->execute(inputs));
  if (outputs.empty() || outputs[0].dtype() != DType::kF32 || !outputs[0].device().is_cpu()) {
    return invalid_program("method '", name, "' does not return host f32 logits");
  }
  KVRT_ASSIGN_OR_RETURN(int64_t count, outputs[0].numel());
  return std::span<const float>(outputs[0].data_as<const float>(), static_cast<size_t>(count));
}

Result<std::span<const float>> Module::prefill(std::span<const int32_t> tokens, int32_t position) {
  return run(kPrefillMethod, tokens, position);
}

Result<std::span<const float>> Module::decode(int32_t token, int32_t position) {
  return run(kDecodeMethod, std::span<const int32_t>(&token, 1), position);
}

Status Module::reset() {
  return buffers_->reset();
}

const StepStats& Module::last_stats() const {
  return last_ ? last_->last_stats() : empty_stats_;
}

}  // namespace kvrt::runtime
