#include "kvrt/runtime/module.h"

#include <algorithm>
#include <cstring>

#include "kvrt/delegate/engine_delegate.h"

namespace kvrt::runtime {
namespace {

constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

int output_named(const format::MethodSpec& spec, std::string_view name) {
  for (size_t k = 0; k < spec.outputs.size(); ++k) {
    if (spec.values[static_cast<size_t>(spec.outputs[k])].name == name) return static_cast<int>(k);
  }
  return -1;
}

}  // namespace

Result<std::unique_ptr<Module>> Module::load(const std::string& path,
                                             const ModuleOptions& options) {
  KVRT_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, Program::load(path));
  return create(std::move(program), options);
}

Result<std::unique_ptr<Module>> Module::create(std::shared_ptr<const Program> program,
                                               const ModuleOptions& options) {
  auto module = std::make_unique<Module>();
  module->program_ = std::move(program);
  module->device_ = options.device;
  module->greedy_steps_option_ = options.max_greedy_steps;
  KVRT_ASSIGN_OR_RETURN(module->api_, delegate::device_api_for(options.device));
  KVRT_ASSIGN_OR_RETURN(module->stream_, module->api_->create_stream());
  KVRT_ASSIGN_OR_RETURN(module->buffers_,
                        BufferSet::create(module->program_->spec(), *module->api_, options.device));
  MethodOptions method_options;
  method_options.device = options.device;
  method_options.num_threads = options.num_threads;
  method_options.stream = module->stream_;
  for (const format::MethodSpec& spec : module->program_->spec().methods) {
    KVRT_ASSIGN_OR_RETURN(
        std::unique_ptr<Method> method,
        Method::load(module->program_, spec.name, *module->buffers_, method_options));
    module->methods_.push_back(std::move(method));
  }
  KVRT_RETURN_IF_ERROR(module->init_io());
  return module;
}

Module::~Module() {
  (void)drain_queue();
  methods_.clear();  // they use the stream until they go
  if (api_ != nullptr && stream_ != nullptr) api_->destroy_stream(stream_);
}

// The logits and next token of each method, the vocabulary (from the logits, [1, V]),
// the cache capacity (dim 1 of the [KVH, S, D] caches), and the staging areas every
// call uses: the device's copies of tokens, position and greedy tokens, and their host
// (pinned on a device) counterparts.
Status Module::init_io() {
  for (const auto& method : methods_) {
    const format::MethodSpec& spec = method->spec();
    Outputs io;
    io.logits = output_named(spec, "logits");
    if (io.logits < 0 && !spec.outputs.empty()) io.logits = 0;
    io.next_token = output_named(spec, "next_token");
    if (io.next_token >= 0) {
      const format::ValueSpec& next =
          spec.values[static_cast<size_t>(spec.outputs[static_cast<size_t>(io.next_token)])];
      if (next.dtype != DType::kI32) io.next_token = -1;
    }
    if (io.logits >= 0 && vocab_size_ == 0) {
      const format::ValueSpec& logits =
          spec.values[static_cast<size_t>(spec.outputs[static_cast<size_t>(io.logits)])];
      if (logits.dtype == DType::kF32 && logits.shape.size() == 2) {
        vocab_size_ = logits.shape[1].size;
      }
    }
    outputs_.push_back(io);
    Result<int64_t> tokens = max_tokens(spec.name);
    if (tokens.ok()) max_call_tokens_ = std::max(max_call_tokens_, *tokens);
  }
  for (const BufferSet::Buffer& buffer : buffers_->buffers()) {
    if (buffer.shape.rank() == 3) {
      max_seq_len_ = buffer.shape[1];
      break;
    }
  }
  if (const Method* decode = method(kDecodeMethod); decode != nullptr) {
    const int step_output = decode->step_output();
    if (step_output >= 0 && step_output == outputs_[*method_index(kDecodeMethod)].next_token) {
      const int wanted = greedy_steps_option_ > 0 ? greedy_steps_option_
                         : device_.is_cpu()       ? 1
                                                  : kMaxSteps;
      max_greedy_steps_ = std::clamp(std::min(wanted, decode->max_steps()), 1, kMaxSteps);
    }
  }
  static_assert(kMaxSteps * sizeof(int32_t) <= kAlign, "a device token slot holds a run");
  static_assert(kRing * kMaxSteps * sizeof(int32_t) <= kAlign, "the host ring holds the runs");
  const size_t tokens_bytes = static_cast<size_t>(max_call_tokens_ + 1) * sizeof(int32_t);
  KVRT_ASSIGN_OR_RETURN(device_io_, Allocation::create(3 * kAlign + aligned(tokens_bytes), api_));
  const size_t logits_bytes = aligned(static_cast<size_t>(vocab_size_) * sizeof(float));
  KVRT_ASSIGN_OR_RETURN(
      host_io_, device_.is_cpu()
                    ? Allocation::create(logits_bytes + 2 * kAlign + tokens_bytes, nullptr)
                    : Allocation::create_host(logits_bytes + 2 * kAlign + tokens_bytes, *api_));
  return Status();
}

int32_t* Module::device_token_slot(size_t k) const {
  return reinterpret_cast<int32_t*>(device_io_.data() + k * kAlign);
}
int32_t* Module::device_position() const {
  return reinterpret_cast<int32_t*>(device_io_.data() + 2 * kAlign);
}
int32_t* Module::device_tokens() const {
  return reinterpret_cast<int32_t*>(device_io_.data() + 3 * kAlign);
}
float* Module::host_logits() const {
  return reinterpret_cast<float*>(host_io_.data());
}
int32_t* Module::host_tokens() const {
  return reinterpret_cast<int32_t*>(host_io_.data() +
                                    aligned(static_cast<size_t>(vocab_size_) * sizeof(float)));
}
int32_t* Module::host_positions() const {
  return host_tokens() + kAlign / sizeof(int32_t);
}
int32_t* Module::host_staging() const {
  return host_positions() + kAlign / sizeof(int32_t);
}

Method* Module::method(std::string_view name) {
  for (auto& method : methods_) {
    if (method->spec().name == name) return method.get();
  }
  return nullptr;
}

Result<size_t> Module::method_index(std::string_view name) const {
  for (size_t m = 0; m < methods_.size(); ++m) {
    if (methods_[m]->spec().name == name) return m;
  }
  return not_found("program has no method '", name, "'");
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

// A device engine reads ids and positions from device memory, where it cannot check
// them without a sync: bad ones are refused here, before anything runs.
Status Module::check_call(std::string_view name, std::span<const int32_t> tokens,
                          int32_t position) const {
  const int64_t count = static_cast<int64_t>(tokens.size());
  if (count > max_call_tokens_) {
    return invalid_argument("method '", name, "': ", count, " tokens exceed the largest call of ",
                            max_call_tokens_);
  }
  if (position < 0 || (max_seq_len_ > 0 && int64_t{position} + count > max_seq_len_)) {
    return invalid_argument("method '", name, "': positions ", position, "..",
                            int64_t{position} + count - 1, " do not fit the cache of ",
                            max_seq_len_, " positions");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || (vocab_size_ > 0 && tokens[i] >= vocab_size_)) {
      return invalid_argument("method '", name, "': token id ", tokens[i], " (index ", i,
                              ") is outside the vocabulary of ", vocab_size_);
    }
  }
  return Status();
}

Result<std::span<const float>> Module::run(std::string_view name, std::span<const int32_t> tokens,
                                           int32_t position) {
  KVRT_ASSIGN_OR_RETURN(size_t m, method_index(name));
  KVRT_RETURN_IF_ERROR(check_call(name, tokens, position));
  if (outputs_[m].logits < 0) return invalid_program("method '", name, "' returns no logits");
  // Queued greedy steps may still read the staging area.
  if (!pending_.empty()) KVRT_RETURN_IF_ERROR(api_->synchronize(stream_));
  int32_t* staged = host_staging();
  std::copy(tokens.begin(), tokens.end(), staged);
  staged[tokens.size()] = position;
  KVRT_RETURN_IF_ERROR(
      api_->copy_async(device_tokens(), staged, (tokens.size() + 1) * sizeof(int32_t), stream_));
  int32_t* device_position_copy = device_tokens() + tokens.size();
  const TensorView inputs[] = {
      TensorView(device_tokens(), DType::kI32, {1, static_cast<int64_t>(tokens.size())}, device_),
      TensorView(device_position_copy, DType::kI32, {1}, device_)};
  Method& target = *methods_[m];
  last_ = &target;
  RunOptions options;
  options.synchronize = false;
  KVRT_ASSIGN_OR_RETURN(std::span<const TensorView> outputs, target.execute(inputs, options));
  const TensorView& logits = outputs[static_cast<size_t>(outputs_[m].logits)];
  if (logits.dtype() != DType::kF32) {
    return invalid_program("method '", name, "' does not return f32 logits");
  }
  KVRT_ASSIGN_OR_RETURN(int64_t count, logits.numel());
  if (count > vocab_size_) return invalid_program("method '", name, "' returns too many logits");
  const float* host = logits.data_as<const float>();
  if (!logits.device().is_cpu()) {
    KVRT_RETURN_IF_ERROR(api_->copy_async(host_logits(), logits.data(),
                                          static_cast<size_t>(count) * sizeof(float), stream_));
    host = host_logits();
  }
  KVRT_RETURN_IF_ERROR(api_->synchronize(stream_));
  return std::span<const float>(host, static_cast<size_t>(count));
}

Result<std::span<const float>> Module::prefill(std::span<const int32_t> tokens, int32_t position) {
  return run(kPrefillMethod, tokens, position);
}

Result<std::span<const float>> Module::decode(int32_t token, int32_t position) {
  return run(kDecodeMethod, std::span<const int32_t>(&token, 1), position);
}

Status Module::reset() {
  KVRT_RETURN_IF_ERROR(drain_queue());
  return buffers_->reset();
}

const StepStats& Module::last_stats() const {
  return last_ ? last_->last_stats() : empty_stats_;
}

}  // namespace kvrt::runtime
