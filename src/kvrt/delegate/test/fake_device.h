// A fake "cuda:0" for testing the engine delegate's device paths without a GPU.
// Memory is host memory labelled Device::cuda(0); the fake knows which ranges it
// "allocated" (like cudaPointerGetAttributes). Streams are queues that run only when
// someone synchronizes or waits on an event, so work really is in flight after
// execute returns. The engine wraps the CPU engine and refuses to be reconfigured or
// destroyed while a run is queued: exactly the TensorRT rule that E2 protects.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kvrt/engine/common/device_api.h"
#include "kvrt/engine/common/engine_target.h"

namespace kvrt::delegate::testing {

class FakeDeviceApi final : public engine::DeviceApi {
 public:
  struct Stream {
    std::deque<std::function<void()>> queue;
    uint64_t submitted = 0;  // operations ever queued
    uint64_t completed = 0;
  };
  struct Event {
    Stream* stream;
    uint64_t sequence;
  };

  Device device() const override { return Device::cuda(0); }
  Result<Device> current_device() const override;
  Status set_current_device(Device device) override;
  bool is_engine_accessible(const TensorView& view) const override;
  Result<void*> allocate(size_t bytes) override;
  void free(void* ptr) override;
  Status fill_zero(void* ptr, size_t bytes) override;
  Result<engine::StreamHandle> create_stream() override;
  void destroy_stream(engine::StreamHandle stream) override;
  Status copy_async(void* dst, const void* src, size_t bytes, engine::StreamHandle stream) override;
  Result<engine::EventHandle> record_event(engine::StreamHandle stream) override;
  Status wait_event(engine::EventHandle event) override;
  Status stream_wait_event(engine::StreamHandle stream, engine::EventHandle event) override;
  void destroy_event(engine::EventHandle event) override;
  Status synchronize(engine::StreamHandle stream) override;

  // Queues `work` on `stream` (what an engine's enqueue does).
  void submit(engine::StreamHandle stream, std::function<void()> work);
  // Marks [ptr, ptr + bytes) as device memory of cuda:0 (test-owned buffers).
  void register_device_memory(const void* ptr, size_t bytes);
  // Forgets every range given to register_device_memory (test buffers come and go).
  void forget_registered_memory();
  // Operations queued but not run, over all streams.
  uint64_t pending() const;

  // Fault injection and counters.
  int fail_copies_after_enqueue = 0;  // fail this many copies issued while a run is queued
  bool fail_record_event = false;
  int fail_allocations = 0;  // fail this many allocate() calls
  int host_waits = 0;        // synchronize + wait_event calls
  int device_waits = 0;      // stream_wait_event calls
  std::vector<engine::StreamHandle> enqueue_streams;
  int64_t copied_bytes = 0;
  int engine_runs_queued = 0;  // maintained by FakeDeviceEngine
  Device current = Device::cuda(0);

 private:
  void run_until(Stream& stream, uint64_t sequence);
  mutable std::recursive_mutex mutex_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::pair<const std::byte*, size_t>> device_ranges_;      // allocate()
  std::vector<std::pair<const std::byte*, size_t>> registered_ranges_;  // tests
};

// The process-wide fake (one "device").
FakeDeviceApi& fake_device();

// Options a test can set; fake engines read them at each call.
struct FakeEngineOptions {
  std::optional<Shape> output_shape_override;  // reported by output_shape() (D5 tests)
  // The engine takes its bindings with each queued run (enqueue_snapshots_bindings), so
  // binding while a run is queued is allowed.
  bool snapshot_bindings = false;
};
FakeEngineOptions& fake_engine_options();
// Engines destroyed while one of their runs was still queued (must stay 0).
std::atomic<int>& engines_destroyed_in_flight();
// Calls that reconfigured an engine while its run was queued (must stay 0).
std::atomic<int>& reconfigured_in_flight();
// Calls that overlapped on one engine (D6; must stay 0).
std::atomic<int>& concurrent_engine_calls();

// The engine target for DeviceType::kCuda backed by the fake: register it in SetUp,
// unregister in TearDown.
engine::EngineTarget fake_cuda_target();

}  // namespace kvrt::delegate::testing
