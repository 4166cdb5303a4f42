// Engine delegate execute: the hot path between the program and the engine.
//
//   execute(args)                      args = inputs..., outputs... (blob order, A3)
//     lock the handle                  D6
//     order after the previous call    E2 (host wait on its completion event or a drain;
//                                      on the device when the engine allows it)
//     check every argument             D1: count, dtype, rank, bounds, contiguity
//     check aliased inputs             D2: on the engine's device, non-empty
//     route each argument              direct | staged (D4) | alias same (D3) | reflect
//     bind, then submit:               staged-in copies, enqueue, D5 resize checks,
//                                      reflect and staged-out copies, all on one stream
//     finish                           E3: caller stream and no host I/O -> event only;
//                                      otherwise drain
//
// Every check happens before the first submission, so a rejected call changes nothing
// the caller owns. From the first submission on, an InFlightScope guarantees that
// every return path either drains the stream or leaves a completion event (E2).
#include "kvrt/core/log.h"
#include "kvrt/delegate/engine_delegate_handle.h"

namespace kvrt::delegate::detail {

// Tracks the async work one execute submits (E2). Call submitting() immediately
// before each submission; finish with leave_event() or drain(). If neither ran (an
// early error return), the destructor drains, so no path leaves work running unseen.
class InFlightScope {
 public:
  InFlightScope(EngineDelegateHandle& handle, engine::StreamHandle stream)
      : handle_(handle), stream_(stream) {}
  InFlightScope(const InFlightScope&) = delete;
  InFlightScope& operator=(const InFlightScope&) = delete;
  ~InFlightScope() {
    if (!settled_ && handle_.in_flight_) (void)drain();
  }

  void submitting() {
    handle_.in_flight_ = true;
    handle_.in_flight_stream_ = stream_;
  }

  // Leaves a completion event that the next execute and destroy wait on (E3 path).
  Status leave_event() {
    settled_ = true;
    if (!handle_.in_flight_) return Status();
    Result<engine::EventHandle> event = handle_.api_->record_event(stream_);
    if (event.ok()) {
      handle_.api_->destroy_event(handle_.completion_);  // an earlier call's, now covered
      handle_.completion_ = *event;
      return Status();
    }
    // Could not arm the completion marker: drain now, so the next execute and destroy
    // never touch the engine while this work runs. The work itself is then complete.
    log(LogLevel::kWarn, "engine delegate: ", event.status().to_string(), "; draining instead");
    return drain();
  }

  // Blocks until everything submitted is done. On failure the handle stays in flight,
  // so the next execute waits (and fails) again rather than reconfiguring the engine.
  Status drain() {
    settled_ = true;
    Status status = handle_.api_->synchronize(stream_);
    if (status.ok()) {
      handle_.in_flight_ = false;
      handle_.api_->destroy_event(handle_.completion_);  // an earlier call's, now passed
      handle_.completion_ = nullptr;
    }
    return status;
  }

 private:
  EngineDelegateHandle& handle_;
  engine::StreamHandle stream_;
  bool settled_ = false;
};

namespace {

const char* side_name(bool is_input) {
  return is_input ? "input" : "output";
}

bool ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace

// E2 for an engine whose launches keep no reference to the bindings: the previous
// call's completion event orders this call's work after it on the device, and the host
// goes on binding the next call while the previous one runs (the decode pipeline).
Status EngineDelegateHandle::order_after_in_flight(engine::StreamHandle stream) {
  if (!in_flight_ || completion_ == nullptr || !engine_->enqueue_snapshots_bindings()) {
    return wait_in_flight();
  }
  if (stream == in_flight_stream_) return Status();  // one stream: already in order
  return api_->stream_wait_event(stream, completion_);
}

Status EngineDelegateHandle::wait_in_flight() {
  if (!in_flight_) return Status();
  if (completion_ != nullptr) {
    KVRT_RETURN_IF_ERROR(api_->wait_event(completion_));
    api_->destroy_event(completion_);
    completion_ = nullptr;
  } else {
    KVRT_RETURN_IF_ERROR(api_->synchronize(in_flight_stream_));
  }
  in_flight_ = false;
  return Status();
}

// A run of steps: within the engine's bound, with the step argument holding one token
// per step. Checked with D1, before anything is bound.
Status EngineDelegateHandle::check_steps(std::span<const TensorView> args, int steps) const {
  if (steps == 1) return Status();
  if (steps < 1 || steps > max_steps()) {
    return max_steps() == 1
               ? not_supported("the engine runs one step per call, asked for ", steps)
               : invalid_argument("a run of ", steps, " steps: the engine runs 1 to ", max_steps());
  }
  const TensorView& ids = args[static_cast<size_t>(step_arg_)];
  if (ids.shape() != Shape{steps, 1}) {
    return invalid_argument("output '", binding(static_cast<size_t>(step_arg_)).name,
                            "' holds one token per step: ", ids.shape().to_string(),
                            " for a run of ", steps);
  }
  return Status();
}

// D1: everything about each argument that does not depend on aliasing.
Status EngineDelegateHandle::check_arguments(std::span<const TensorView> args, int steps) const {
  if (args.size() != num_args()) {
    return invalid_argument("engine delegate expects ", num_args(), " arguments (", num_inputs(),
                            " inputs + ", signature_.outputs.size(), " outputs), got ",
                            args.size());
  }
  KVRT_RETURN_IF_ERROR(check_steps(args, steps));
  for (size_t a = 0; a < args.size(); ++a) {
    // The step argument of a run was checked above; one step's shape is [1, 1] of it.
    if (steps != 1 && static_cast<int>(a) == step_arg_) continue;
    const TensorView& arg = args[a];
    const format::BindingSpec& spec = binding(a);
    const char* side = side_name(a < num_inputs());
    auto fail = [&](const auto&... why) {
      return invalid_argument(side, " '", spec.name, "' (argument ", a, "): ", why...);
    };
    if (arg.dtype() != spec.dtype) {
      return fail("dtype ", dtype_name(arg.dtype()), ", expected ", dtype_name(spec.dtype));
    }
    if (arg.rank() != static_cast<int>(spec.shape.size())) {
      return fail("shape ", arg.shape().to_string(), " has rank ", arg.rank(), ", expected ",
                  format::shape_to_string(spec.shape));
    }
    for (int d = 0; d < arg.rank(); ++d) {
      const graph::Dim& dim = spec.shape[static_cast<size_t>(d)];
      const int64_t size = arg.dim(d);
      const int64_t low = a < num_inputs() ? dim.min : 0;
      const bool ok = dim.is_dynamic() ? size >= low && size <= dim.max : size == dim.size;
      if (!ok) {
        return fail("shape ", arg.shape().to_string(), " is outside ",
                    format::shape_to_string(spec.shape));
      }
    }
    if (!arg.is_contiguous()) return fail("must be contiguous");
    Result<int64_t> bytes = arg.nbytes();
    if (!bytes.ok()) return fail(bytes.status().message());
    if (arg.data() == nullptr && *bytes != 0) return fail("null storage");
    // Aliased inputs get their own, stricter device check (D2).
    const bool aliased_input = a < num_inputs() && input_is_aliased_[a];
    if (!aliased_input && !(arg.device() == device_) && !arg.device().is_cpu()) {
      return fail("is on ", arg.device().to_string(), ", the engine on ", device_.to_string());
    }
  }
  return Status();
}

// D2: an aliased input is written in place, so it must be the caller's real storage
// on the engine's device. Checked before routing, so neither staging nor a zero-size
// shortcut can ever stand in for it.
Status EngineDelegateHandle::check_aliased_inputs(std::span<const TensorView> args) const {
  for (size_t i = 0; i < num_inputs(); ++i) {
    if (!input_is_aliased_[i]) continue;
    const TensorView& arg = args[i];
    const std::string& name = signature_.inputs[i].name;
    if (arg.empty()) {
      return invalid_argument("aliased input '", name, "' must be non-empty device memory on ",
                              device_.to_string());
    }
    if (!(arg.device() == device_) || !api_->is_engine_accessible(arg)) {
      return invalid_argument("aliased input '", name, "' must be device memory on ",
                              device_.to_string(), " (it is on ", arg.device().to_string(), ")");
    }
  }
  return Status();
}

Status EngineDelegateHandle::ensure_staging(size_t arg, size_t bytes) {
  Staging& staging = staging_[arg];
  if (staging.bytes >= bytes && staging.ptr != nullptr) return Status();
  // The old buffer may still be read by a call in flight: free it only after that.
  if (staging.ptr != nullptr) {
    KVRT_RETURN_IF_ERROR(wait_in_flight());
    api_->free(staging.ptr);
  }
  staging = {};
  KVRT_ASSIGN_OR_RETURN(staging.ptr, api_->allocate(bytes));
  staging.bytes = bytes;
  return Status();
}

// D3, D4: how each argument reaches the engine. Aliased inputs are always direct (D2).
Status EngineDelegateHandle::plan_routes(std::span<const TensorView> args) {
  for (size_t a = 0; a < args.size(); ++a) {
    const TensorView& arg = args[a];
    arg_bytes_[a] = *arg.nbytes();
    const bool on_device = arg.device() == device_;
    const int alias = a < num_inputs() ? -1 : alias_of_output_[a - num_inputs()];
    if (alias >= 0) {
      const TensorView& source = args[static_cast<size_t>(alias)];
      bind_ptrs_[a] = bind_ptrs_[static_cast<size_t>(alias)];
      if (arg.data() == source.data()) {
        routes_[a] = Route::kAliasSame;
        continue;
      }
      if (ranges_overlap(arg.data(), arg_bytes_[a], source.data(), arg_bytes_[alias])) {
        return invalid_argument("aliased output '", binding(a).name,
                                "' partially overlaps the storage of input '",
                                binding(static_cast<size_t>(alias)).name, "'");
      }
      routes_[a] = Route::kAliasReflect;
    } else if (on_device || arg_bytes_[a] == 0) {
      routes_[a] = Route::kDirect;
      bind_ptrs_[a] = arg.data();
    } else {
      routes_[a] = Route::kStaged;
      KVRT_RETURN_IF_ERROR(ensure_staging(a, static_cast<size_t>(arg_bytes_[a])));
      bind_ptrs_[a] = staging_[a].ptr;
    }
  }
  return Status();
}

Status EngineDelegateHandle::bind(std::span<const TensorView> args, int steps) {
  for (size_t a = 0; a < args.size(); ++a) {
    // A run's step argument is bound with one call's shape; its storage holds them all.
    const bool step_ids = steps != 1 && static_cast<int>(a) == step_arg_;
    Status status = engine_->set_tensor(engine_index_[a], bind_ptrs_[a],
                                        step_ids ? Shape{1, 1} : args[a].shape());
    if (!status.ok()) return status.with_context(binding(a).name);
  }
  return Status();
}

// D5: every output's produced shape is checked — rank, bounds, and fit in the
// caller's storage — for aliased and plain outputs alike, then the views are resized.
Status EngineDelegateHandle::resize_outputs(std::span<TensorView> args, int steps) {
  std::vector<Shape>& shapes = resized_;
  shapes.clear();
  for (size_t o = 0; o < signature_.outputs.size(); ++o) {
    const size_t a = num_inputs() + o;
    const format::BindingSpec& spec = signature_.outputs[o];
    if (steps != 1 && static_cast<int>(a) == step_arg_) {  // one token per step, as given
      shapes.push_back(args[a].shape());
      continue;
    }
    Result<Shape> produced = engine_->output_shape(spec.name);
    if (!produced.ok()) return produced.status().with_context("output '" + spec.name + "'");
    const Shape& shape = *produced;
    bool ok = shape.rank() == static_cast<int>(spec.shape.size());
    for (int d = 0; ok && d < shape.rank(); ++d) {
      const graph::Dim& dim = spec.shape[static_cast<size_t>(d)];
      ok = dim.is_dynamic() ? shape[d] >= dim.min && shape[d] <= dim.max : shape[d] == dim.size;
    }
    Result<int64_t> need = shape.numel();
    Result<int64_t> have = args[a].numel();
    if (!ok || !need.ok() || !have.ok() || *need > *have) {
      return invalid_argument("output '", spec.name, "': the engine produced shape ",
                              shape.to_string(), ", which does not fit ",
                              format::shape_to_string(spec.shape), " in storage of shape ",
                              args[a].shape().to_string());
    }
    shapes.push_back(shape);
  }
  for (size_t o = 0; o < shapes.size(); ++o) {
    const size_t a = num_inputs() + o;
    args[a] = TensorView(args[a].data(), args[a].dtype(), shapes[o], args[a].device());
    arg_bytes_[a] = *args[a].nbytes();
  }
  return Status();
}

Status EngineDelegateHandle::execute(std::span<TensorView> args, const ExecuteOptions& options) {
  std::lock_guard lock(mutex_);  // D6
  engine::CurrentDeviceGuard device_guard(*api_);
  KVRT_RETURN_IF_ERROR(device_guard.status());
  KVRT_RETURN_IF_ERROR(api_->set_current_device(device_));
  stats_ = ExecuteStats{};
  stats_.arg_bytes.assign(num_args(), 0);

  const engine::StreamHandle stream = options.stream ? options.stream : own_stream_;  // E1
  KVRT_RETURN_IF_ERROR(order_after_in_flight(stream));                                // E2
  KVRT_RETURN_IF_ERROR(check_arguments(args, options.steps));                         // D1
  KVRT_RETURN_IF_ERROR(check_aliased_inputs(args));                                   // D2
  KVRT_RETURN_IF_ERROR(plan_routes(args));                                            // D3, D4
  if (options.steps != 1) {
    // A run is one submission: no staging or reflect copy may sit between its steps.
    for (size_t a = 0; a < args.size(); ++a) {
      if (routes_[a] == Route::kDirect || routes_[a] == Route::kAliasSame) continue;
      return invalid_argument(side_name(a < num_inputs()), " '", binding(a).name,
                              "': a run of steps binds every argument in place on ",
                              device_.to_string(), " (it is on ", args[a].device().to_string(),
                              ")");
    }
  }
  KVRT_RETURN_IF_ERROR(bind(args, options.steps));

  InFlightScope in_flight(*this, stream);
  bool host_io = false;
  for (size_t i = 0; i < num_inputs(); ++i) {
    if (routes_[i] != Route::kStaged) continue;
    host_io = true;
    in_flight.submitting();
    KVRT_RETURN_IF_ERROR(api_->copy_async(bind_ptrs_[i], args[i].data(),
                                          static_cast<size_t>(arg_bytes_[i]), stream));
    stats_.staged_in_bytes += arg_bytes_[i];
    stats_.arg_bytes[i] += arg_bytes_[i];
  }
  in_flight.submitting();
  KVRT_RETURN_IF_ERROR(options.steps == 1 ? engine_->enqueue(stream)
                                          : engine_->enqueue_steps(stream, options.steps));
  KVRT_RETURN_IF_ERROR(resize_outputs(args, options.steps));  // D5
  for (size_t a = num_inputs(); a < num_args(); ++a) {
    if (routes_[a] != Route::kAliasReflect && routes_[a] != Route::kStaged) continue;
    // Reflect (D3): the engine wrote the aliased input's storage; mirror it into the
    // output argument, ordered after the engine on the same stream. Staged (D4):
    // device staging back to the caller's host storage.
    host_io = host_io || !(args[a].device() == device_);
    KVRT_RETURN_IF_ERROR(api_->copy_async(args[a].data(), bind_ptrs_[a],
                                          static_cast<size_t>(arg_bytes_[a]), stream));
    (routes_[a] == Route::kStaged ? stats_.staged_out_bytes : stats_.reflect_bytes) +=
        arg_bytes_[a];
    stats_.arg_bytes[a] += arg_bytes_[a];
  }
  // E3: device-resident I/O on the caller's stream returns without a host sync.
  if (options.stream != nullptr && !host_io) return in_flight.leave_event();
  stats_.host_synchronized = true;
  return in_flight.drain();
}

}  // namespace kvrt::delegate::detail
