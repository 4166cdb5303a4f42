// Engine delegate init and destroy: read the blob, build the engine on the requested
// device, and refuse any disagreement between the blob and the engine before the first
// execute (C1-C4). Execute lives in engine_delegate.cpp.
#include <string>

#include "kvrt/core/log.h"
#include "kvrt/delegate/engine_delegate.h"
#include "kvrt/delegate/engine_delegate_handle.h"
#include "kvrt/engine/common/engine_target.h"
#include "kvrt/engine/cpu/cpu_engine.h"

namespace kvrt::delegate {
namespace detail {

Result<engine::EngineTarget> resolve_target(DeviceType type) {
  Result<engine::EngineTarget> found = engine::find_engine_target(type);
  if (found.ok()) return found;
  // The CPU engine is part of the delegate; every other target is registered by the
  // program at start-up (engine/builtin_targets.h) or by a test.
  if (type == DeviceType::kCpu) {
    KVRT_RETURN_IF_ERROR(engine::register_engine_target(engine::cpu::cpu_engine_target()));
    return engine::find_engine_target(type);
  }
  return not_found("no engine target is registered for ", Device{type, 0}.to_string(),
                   " (a build without the CUDA engine, or engine::register_builtin_targets() "
                   "was not called)");
}

namespace {

std::string dims_string(const std::vector<graph::Dim>& dims) {
  return format::shape_to_string(dims);
}

// Static dims equal; dynamic dims with equal bounds (symbols may differ).
bool same_shape(const std::vector<graph::Dim>& a, const std::vector<graph::Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (a[d].is_dynamic() != b[d].is_dynamic()) return false;
    if (!a[d].is_dynamic() && a[d].size != b[d].size) return false;
    if (a[d].is_dynamic() && (a[d].min != b[d].min || a[d].max != b[d].max)) return false;
  }
  return true;
}

// A blob binding fits an engine tensor when dtypes are equal, static dims are equal and
// dynamic dims are dynamic in the engine with bounds at least as wide.
bool binding_fits(const format::BindingSpec& binding, const engine::TensorInfo& info) {
  if (binding.dtype != info.dtype || binding.shape.size() != info.shape.size()) return false;
  for (size_t d = 0; d < binding.shape.size(); ++d) {
    const graph::Dim& b = binding.shape[d];
    const graph::Dim& e = info.shape[d];
    if (b.is_dynamic() != e.is_dynamic()) return false;
    if (!b.is_dynamic() && b.size != e.size) return false;
    if (b.is_dynamic() && (b.min < e.min || b.max > e.max)) return false;
  }
  return true;
}

const engine::TensorInfo* find_info(std::span<const engine::TensorInfo> infos,
                                    std::string_view name) {
  for (const engine::TensorInfo& info : infos) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

Status check_side(const std::vector<format::BindingSpec>& bindings,
                  std::span<const engine::TensorInfo> infos, const char* side) {
  for (size_t i = 0; i < bindings.size(); ++i) {
    const format::BindingSpec& binding = bindings[i];
    const engine::TensorInfo* info = find_info(infos, binding.name);
    if (info == nullptr) {
      return invalid_program("blob ", side, " '", binding.name, "' (argument ", i, ") is not an ",
                             side, " of the engine");
    }
    if (!binding_fits(binding, *info)) {
      return invalid_program("blob ", side, " '", binding.name, "' is ", dtype_name(binding.dtype),
                             " ", dims_string(binding.shape), " but the engine's is ",
                             dtype_name(info->dtype), " ", dims_string(info->shape));
    }
  }
  for (const engine::TensorInfo& info : infos) {
    bool listed = false;
    for (const format::BindingSpec& binding : bindings)
      listed = listed || binding.name == info.name;
    if (!listed) {
      return invalid_program("engine ", side, " '", info.name, "' has no binding in the blob");
    }
  }
  return Status();
}

}  // namespace

Status EngineDelegateHandle::check_bindings() const {
  KVRT_RETURN_IF_ERROR(check_side(signature_.inputs, engine_->inputs(), "input"));
  return check_side(signature_.outputs, engine_->outputs(), "output");
}

Status EngineDelegateHandle::check_aliases() {
  alias_of_output_.assign(signature_.outputs.size(), -1);
  input_is_aliased_.assign(signature_.inputs.size(), false);
  for (const format::AliasSpec& alias : signature_.aliases) {
    const int out = format::find_output(signature_, alias.output);
    const int in = format::find_input(signature_, alias.input);
    if (out < 0 || in < 0) {
      return invalid_program("alias '", alias.output, "' -> '", alias.input,
                             "' names an unknown binding");
    }
    const format::BindingSpec& out_spec = signature_.outputs[static_cast<size_t>(out)];
    const format::BindingSpec& in_spec = signature_.inputs[static_cast<size_t>(in)];
    const std::optional<std::string> stated = engine_->aliased_input(alias.output);
    switch (alias.kind) {
      case format::AliasKind::kKvCacheUpdate:
        // C1: the engine's own statement is the source of truth.
        if (stated != alias.input) {
          return invalid_program(
              "output '", alias.output, "' is declared to alias input '", alias.input,
              "' (kv_cache_update) but the engine ",
              stated ? "writes input '" + *stated + "'" : std::string("does not write any input"),
              " in place");
        }
        break;
      case format::AliasKind::kUser:
        // C2: only the producer knows; trust it once storage is interchangeable.
        if (stated) {
          return invalid_program("output '", alias.output, "' writes input '", *stated,
                                 "' in place in the engine, so its alias must be "
                                 "kv_cache_update, not user");
        }
        break;
    }
    if (out_spec.dtype != in_spec.dtype || !same_shape(out_spec.shape, in_spec.shape)) {
      return invalid_program("output '", alias.output, "' (", dtype_name(out_spec.dtype), " ",
                             dims_string(out_spec.shape), ") cannot alias input '", alias.input,
                             "' (", dtype_name(in_spec.dtype), " ", dims_string(in_spec.shape),
                             ")");
    }
    if (alias_of_output_[static_cast<size_t>(out)] >= 0 ||
        input_is_aliased_[static_cast<size_t>(in)]) {
      return invalid_program("alias '", alias.output, "' -> '", alias.input,
                             "' repeats an aliased output or input");
    }
    alias_of_output_[static_cast<size_t>(out)] = in;
    input_is_aliased_[static_cast<size_t>(in)] = true;
  }
  // C3: every in-place write the engine states must be declared by the blob.
  for (size_t o = 0; o < signature_.outputs.size(); ++o) {
    const std::string& name = signature_.outputs[o].name;
    const std::optional<std::string> stated = engine_->aliased_input(name);
    if (stated && alias_of_output_[o] < 0) {
      return invalid_program("the engine writes input '", *stated, "' in place as output '", name,
                             "', but the blob declares no alias for it");
    }
  }
  return Status();
}

Result<std::unique_ptr<DelegateHandle>> EngineDelegateHandle::create(
    std::span<const std::byte> blob_bytes, const engine::WeightProvider& weights,
    const DelegateOptions& options) {
  KVRT_ASSIGN_OR_RETURN(format::Blob blob, format::read_blob(blob_bytes));
  const std::string& target_device = blob.metadata.target_device;
  const bool device_ok = target_device == "any" ||
                         (target_device == "cpu" && options.device.is_cpu()) ||
                         (target_device == "cuda" && options.device.is_cuda());
  if (!device_ok) {
    return invalid_argument("blob targets '", target_device, "', cannot run on ",
                            options.device.to_string());
  }
  KVRT_ASSIGN_OR_RETURN(engine::EngineTarget target, resolve_target(options.device.type));
  KVRT_ASSIGN_OR_RETURN(engine::DeviceApi * api, target.device_api(options.device.index));

  // C4: whatever happens below, the caller's current device is restored on return.
  engine::CurrentDeviceGuard device_guard(*api);
  KVRT_RETURN_IF_ERROR(device_guard.status());
  KVRT_RETURN_IF_ERROR(api->set_current_device(options.device));

  auto handle = std::make_unique<EngineDelegateHandle>();
  handle->api_ = api;
  handle->device_ = options.device;
  handle->signature_ = blob.metadata;
  engine::EngineOptions engine_options;
  engine_options.device = options.device;
  engine_options.num_threads = options.num_threads;
  KVRT_ASSIGN_OR_RETURN(handle->engine_, target.build(blob.payload, weights, engine_options));
  if (!(handle->engine_->device() == options.device)) {
    return internal_error("engine target '", target.name, "' built an engine for ",
                          handle->engine_->device().to_string(), ", asked for ",
                          options.device.to_string());
  }
  KVRT_RETURN_IF_ERROR(handle->check_bindings());
  KVRT_RETURN_IF_ERROR(handle->check_aliases());
  // Names are resolved once here; execute binds by index.
  for (size_t a = 0; a < handle->num_args(); ++a) {
    KVRT_ASSIGN_OR_RETURN(int index, handle->engine_->tensor_index(handle->binding(a).name));
    handle->engine_index_.push_back(index);
    const int step_output = handle->engine_->step_output();
    if (step_output >= 0 &&
        index == static_cast<int>(handle->engine_->inputs().size()) + step_output) {
      handle->step_arg_ = static_cast<int>(a);
    }
  }
  KVRT_ASSIGN_OR_RETURN(handle->own_stream_, api->create_stream());  // E1
  const size_t args = handle->num_args();
  handle->routes_.assign(args, Route::kDirect);
  handle->bind_ptrs_.assign(args, nullptr);
  handle->arg_bytes_.assign(args, 0);
  handle->staging_.assign(args, Staging{});
  handle->stats_.arg_bytes.assign(args, 0);
  return std::unique_ptr<DelegateHandle>(std::move(handle));
}

EngineDelegateHandle::~EngineDelegateHandle() {
  std::lock_guard lock(mutex_);
  if (api_ == nullptr) return;
  engine::CurrentDeviceGuard device_guard(*api_);
  (void)api_->set_current_device(device_);
  // E2: never free what in-flight work may still use.
  Status drained = wait_in_flight();
  if (!drained.ok()) log(LogLevel::kError, "engine delegate destroy: ", drained.to_string());
  for (Staging& staging : staging_) {
    if (staging.ptr != nullptr) api_->free(staging.ptr);
  }
  if (own_stream_ != nullptr) api_->destroy_stream(own_stream_);
  engine_.reset();
}

ExecuteStats EngineDelegateHandle::last_stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace detail

namespace {

class EngineBackend final : public Backend {
 public:
  std::string_view name() const override { return kEngineBackendName; }
  Result<std::unique_ptr<DelegateHandle>> init(std::span<const std::byte> blob,
                                               const engine::WeightProvider& weights,
                                               const DelegateOptions& options) const override {
    Result<std::unique_ptr<DelegateHandle>> handle =
        detail::EngineDelegateHandle::create(blob, weights, options);
    if (!handle.ok()) return handle.status().with_context("engine delegate init");
    return handle;
  }
};

}  // namespace

std::shared_ptr<const Backend> make_engine_backend() {
  return std::make_shared<EngineBackend>();
}

Result<engine::DeviceApi*> device_api_for(Device device) {
  KVRT_ASSIGN_OR_RETURN(engine::EngineTarget target, detail::resolve_target(device.type));
  return target.device_api(device.index);
}

}  // namespace kvrt::delegate
