// The delegate boundary, runtime side: a Backend turns the blob bytes that lowering
// produced into a DelegateHandle at init; the program executor calls
// handle->execute(args) for each delegate_call instruction. Like ExecuTorch's
// backend interface (init / execute / destroy), registered by the name the program
// file stores, but the handle is an owning, typed object: destroying it is the
// destroy step, and it waits for any work still in flight (E2).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/engine/common/device_api.h"
#include "kvrt/engine/common/engine.h"
#include "kvrt/format/blob.h"

namespace kvrt::delegate {

struct DelegateOptions {
  // The device the engine runs on; its type selects the engine target.
  Device device = Device::cpu();
  // Host threads for engines that use them (CPU): 0 picks a default.
  int num_threads = 0;
};

struct ExecuteOptions {
  // The caller's stream (E1). Null: the handle's own stream, and execute returns only
  // when all work is done.
  engine::StreamHandle stream = nullptr;
  // A run of greedy decode steps in one submission (1 to max_steps()): the arguments are
  // one step's, except the step argument (step_arg()), which holds one token per step,
  // [steps, 1]. Step i reads step i - 1's token and runs at the position + i
  // (Engine::enqueue_steps). Every argument must be on the engine's device, in place.
  int steps = 1;
};

// Bytes copied by the last execute, by reason. A program whose caches are bound
// directly sees zero for every cache argument (F2).
struct ExecuteStats {
  int64_t staged_in_bytes = 0;     // host inputs copied to device staging (D4)
  int64_t staged_out_bytes = 0;    // device staging copied back to host outputs (D4)
  int64_t reflect_bytes = 0;       // aliased outputs copied from their input storage (D3)
  std::vector<int64_t> arg_bytes;  // per argument, all of the above
  bool host_synchronized = false;  // execute blocked the host on device work (E3)

  int64_t total_bytes() const { return staged_in_bytes + staged_out_bytes + reflect_bytes; }
};

class DelegateHandle {
 public:
  // Waits for work still in flight, then releases everything (the destroy step).
  virtual ~DelegateHandle() = default;

  // Runs the delegate. `args` are inputs then outputs, positionally in the order of
  // signature().inputs and signature().outputs (A3). Output views are resized to
  // the shapes the engine produced (D5). On error nothing the caller owns has been
  // written and the handle stays usable.
  virtual Status execute(std::span<TensorView> args, const ExecuteOptions& options = {}) = 0;

  // The blob's bindings and aliases, in argument order.
  virtual const format::BlobMetadata& signature() const = 0;
  virtual Device device() const = 0;
  // Runs of steps (ExecuteOptions::steps): the most one execute takes (1: none), and the
  // argument that carries the steps' tokens (-1: none).
  virtual int max_steps() const { return 1; }
  virtual int step_arg() const { return -1; }
  virtual ExecuteStats last_stats() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Validates `blob` and builds whatever execute needs. `blob` and `weights` must
  // outlive the handle (they are the program's mapping). Errors: InvalidProgram for a
  // blob that is malformed or disagrees with the engine, NotFound for a missing weight
  // or engine target, InvalidArgument for unusable options.
  virtual Result<std::unique_ptr<DelegateHandle>> init(std::span<const std::byte> blob,
                                                       const engine::WeightProvider& weights,
                                                       const DelegateOptions& options) const = 0;
};

// Installs `backend` under its name, replacing any previous one. Thread-safe.
Status register_backend(std::shared_ptr<const Backend> backend);
// The backend registered as `name`; "engine" (the engine delegate) is always there.
Result<std::shared_ptr<const Backend>> find_backend(std::string_view name);

}  // namespace kvrt::delegate
