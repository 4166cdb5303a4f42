// Internal: the engine delegate's handle, shared by engine_delegate_init.cpp (init,
// destroy) and engine_delegate.cpp (execute).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "kvrt/delegate/backend.h"
#include "kvrt/engine/common/device_api.h"
#include "kvrt/engine/common/engine.h"
#include "kvrt/engine/common/engine_target.h"

namespace kvrt::delegate::detail {

// The engine target for a device type; registers the built-in CPU target on first use.
Result<engine::EngineTarget> resolve_target(DeviceType type);

// How one argument reaches the engine in one execute.
enum class Route : uint8_t {
  kDirect,        // the caller's storage is on the engine's device: bound as is
  kStaged,        // host storage, non-aliased: copied through device staging (D4)
  kAliasSame,     // aliased output given the input's own storage: bound, no copy (D3)
  kAliasReflect,  // aliased output given other storage: engine writes the input's
                  // storage, then a reflect copy on the stream (D3)
};

class EngineDelegateHandle final : public DelegateHandle {
 public:
  // init (engine_delegate_init.cpp).
  static Result<std::unique_ptr<DelegateHandle>> create(std::span<const std::byte> blob,
                                                        const engine::WeightProvider& weights,
                                                        const DelegateOptions& options);
  ~EngineDelegateHandle() override;

  // execute (engine_delegate.cpp).
  Status execute(std::span<TensorView> args, const ExecuteOptions& options) override;

  const format::BlobMetadata& signature() const override { return signature_; }
  Device device() const override { return device_; }
  int max_steps() const override { return step_arg_ >= 0 ? engine_->max_steps() : 1; }
  int step_arg() const override { return step_arg_; }
  ExecuteStats last_stats() const override;

  EngineDelegateHandle() = default;

 private:
  friend class InFlightScope;
  struct Staging {
    void* ptr = nullptr;
    size_t bytes = 0;
  };

  // Init helpers: bindings against the engine, then aliases (C1-C3).
  Status check_bindings() const;
  Status check_aliases();

  // Execute steps, in order.
  Status wait_in_flight();
  Status order_after_in_flight(engine::StreamHandle stream);
  Status check_arguments(std::span<const TensorView> args, int steps) const;  // D1
  Status check_steps(std::span<const TensorView> args, int steps) const;
  Status check_aliased_inputs(std::span<const TensorView> args) const;  // D2
  Status plan_routes(std::span<const TensorView> args);                 // D3, D4
  Status bind(std::span<const TensorView> args, int steps);
  Status resize_outputs(std::span<TensorView> args, int steps);  // D5
  Status ensure_staging(size_t arg, size_t bytes);

  size_t num_inputs() const { return signature_.inputs.size(); }
  size_t num_args() const { return signature_.inputs.size() + signature_.outputs.size(); }
  const format::BindingSpec& binding(size_t arg) const {
    return arg < num_inputs() ? signature_.inputs[arg] : signature_.outputs[arg - num_inputs()];
  }

  // Fixed at init.
  format::BlobMetadata signature_;
  std::unique_ptr<engine::Engine> engine_;
  engine::DeviceApi* api_ = nullptr;
  Device device_;
  engine::StreamHandle own_stream_ = nullptr;
  std::vector<int> alias_of_output_;  // per output: aliased input index, or -1
  std::vector<int> engine_index_;     // per argument: the engine's tensor index
  std::vector<bool> input_is_aliased_;
  int step_arg_ = -1;  // the argument bound to the engine's step output, or -1

  // Per execute, under mutex_ (D6).
  mutable std::mutex mutex_;
  std::vector<Route> routes_;       // per argument
  std::vector<void*> bind_ptrs_;    // per argument: what the engine is given
  std::vector<int64_t> arg_bytes_;  // per argument: its bytes at its actual shape
  std::vector<Staging> staging_;    // per argument, grown on demand, freed at destroy
  std::vector<Shape> resized_;      // per output: the produced shape (D5)
  ExecuteStats stats_;

  // In-flight state (E2): set the moment async work is submitted; cleared only once
  // that work is known to be complete.
  bool in_flight_ = false;
  engine::StreamHandle in_flight_stream_ = nullptr;
  engine::EventHandle completion_ = nullptr;
};

}  // namespace kvrt::delegate::detail
