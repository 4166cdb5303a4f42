// The engine interface: what the engine delegate drives. An engine is built from a
// partition's payload (its subgraph) plus the program's weights; it exposes named I/O
// tensors, states which input each output aliases, takes addresses, and enqueues.
// The CPU engine (engine/cpu) is the reference; a CUDA engine plugs in behind the same
// interface without changes to the delegate.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/engine/common/device_api.h"
#include "kvrt/graph/graph.h"

namespace kvrt::engine {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<graph::Dim> shape;
};

// State that every engine built from one WeightProvider may share, e.g. a device
// engine's uploaded weights (one copy per program and device, F5).
class SharedState {
 public:
  virtual ~SharedState() = default;
};

// Weights live once in the program's weight segment; engines look them up by name and
// must not copy them on the host (a device engine uploads them once at build).
class WeightProvider {
 public:
  WeightProvider() = default;
  // A copy is another provider: it starts with no shared state of its own.
  WeightProvider(const WeightProvider&) {}
  WeightProvider& operator=(const WeightProvider&) { return *this; }
  virtual ~WeightProvider() = default;
  // A host view of the named weight (dtype and shape as stored), or NotFound.
  virtual Result<TensorView> weight(std::string_view name) const = 0;

  using SharedStateFactory = std::function<Result<std::shared_ptr<SharedState>>()>;
  // The state stored under `key` ("cuda:0/weights"), made by `make` on first use and
  // kept until the provider goes. Thread-safe; a failed `make` stores nothing.
  Result<std::shared_ptr<SharedState>> shared_state(const std::string& key,
                                                    const SharedStateFactory& make) const;

 private:
  mutable std::mutex shared_mutex_;
  mutable std::map<std::string, std::shared_ptr<SharedState>, std::less<>> shared_;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual Device device() const = 0;
  // I/O in the engine's own order (the order of the partition subgraph's inputs and
  // outputs); the delegate maps blob bindings to these by name.
  virtual std::span<const TensorInfo> inputs() const = 0;
  virtual std::span<const TensorInfo> outputs() const = 0;
  // The engine's own statement of which input an output writes in place (C1, C3):
  // derived from its ops (kv_cache_write), not from any metadata.
  virtual std::optional<std::string> aliased_input(std::string_view output_name) const = 0;

  // Binds the storage and the actual shape of a tensor for the next enqueue. For an
  // output, `shape` is the capacity of the storage; enqueue fails before writing
  // anything if the output would not fit.
  virtual Status set_tensor(std::string_view name, void* data, const Shape& shape) = 0;
  // The same by index (inputs 0..n-1, then outputs n..), resolved once with
  // tensor_index() so the hot path binds without name lookups. The default forwards to
  // set_tensor by name; engines override it with a direct binding.
  virtual Status set_tensor(int index, void* data, const Shape& shape);
  // The index of tensor `name` for set_tensor(int), or NotFound.
  Result<int> tensor_index(std::string_view name) const;
  // Runs the subgraph with the bound tensors on `stream` (CPU: synchronously). Every
  // check that can fail (shapes, positions, token ids) happens before the first write,
  // so a failed enqueue leaves outputs and in-place caches untouched.
  virtual Status enqueue(StreamHandle stream) = 0;
  // True when enqueue reads the bindings on the host only and the work it submits
  // never reads engine state the next set_tensor changes (pointers baked into the
  // launches). The delegate may then bind and enqueue the next call while this one
  // still runs, ordered after it on the device (E2) instead of waiting on the host.
  virtual bool enqueue_snapshots_bindings() const { return false; }

  // Runs of greedy decode steps in one submission (optional; the queued greedy loop's
  // fast path, which saves the per-call launch and host turn of every step but one).
  // The most steps enqueue_steps takes; 1: the engine runs one call per enqueue.
  virtual int max_steps() const { return 1; }
  // The output that carries each step's token (an index into outputs()), or -1.
  virtual int step_output() const { return -1; }
  // Runs `steps` one-token calls on the bound tensors: call i reads its token from
  // element i - 1 of the step output (call 0 from the bound tokens input) and runs at
  // the bound position + i; it writes its token to element i of the step output, whose
  // bound storage holds `steps` ids (bound with the shape of one call's). The other
  // outputs hold the last call's values. Every call is checked before anything is
  // written, as enqueue checks one. The default runs one step, else NotSupported.
  virtual Status enqueue_steps(StreamHandle stream, int steps);
  // Output shape after enqueue (dynamic outputs), or an error naming the output.
  virtual Result<Shape> output_shape(std::string_view name) const = 0;
};

struct EngineOptions {
  Device device = Device::cpu();
  // Host worker threads for engines that use them (CPU): 0 picks a default, 1 runs
  // everything on the calling thread.
  int num_threads = 0;
};

// Builds an engine for the device in `options` from a partition payload.
using EngineBuilder = Result<std::unique_ptr<Engine>> (*)(std::span<const std::byte> payload,
                                                          const WeightProvider& weights,
                                                          const EngineOptions& options);

}  // namespace kvrt::engine
