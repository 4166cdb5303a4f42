// DeviceApi: the few device operations the engine delegate needs around an engine —
// current device (C4), memory kind checks (D2), staging memory (D4), async copies on a
// stream (D3, D4), completion events (E2) and streams (E1). The delegate is written once
// against this interface; the CPU target implements it trivially (host_device_api()),
// a CUDA target with the CUDA runtime, and tests with a fake that defers work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"

namespace kvrt::engine {

// Opaque handles: cudaStream_t / cudaEvent_t for CUDA, nullptr for the host target.
using StreamHandle = void*;
using EventHandle = void*;

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;

  // The device this API drives (the engine's device).
  virtual Device device() const = 0;

  // The calling thread's current device, and a setter; init saves and restores it (C4).
  virtual Result<Device> current_device() const = 0;
  virtual Status set_current_device(Device device) = 0;

  // True when `view` is storage the engine can read and write in place on device():
  // device memory of that device, or managed/unified memory (D2).
  virtual bool is_engine_accessible(const TensorView& view) const = 0;

  // Device memory for staging host I/O (D4), arenas and buffers.
  virtual Result<void*> allocate(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  // Host memory the device copies to and from asynchronously (pinned on CUDA), for
  // outputs the host reads every step. Defaults to the heap.
  virtual Result<void*> allocate_host(size_t bytes);
  virtual void free_host(void* ptr);
  // Sets `bytes` of device memory to zero and waits for it (buffers at load, F4).
  virtual Status fill_zero(void* ptr, size_t bytes) = 0;

  virtual Result<StreamHandle> create_stream() = 0;
  virtual void destroy_stream(StreamHandle stream) = 0;

  // Copies `bytes` between any two locations (host or device) in stream order.
  virtual Status copy_async(void* dst, const void* src, size_t bytes, StreamHandle stream) = 0;
  // Writes `value` to the device's memory at `dst` in stream order, the value carried by
  // the command itself: no host buffer to keep alive, no copy. NotSupported by default;
  // callers then stage the value through host memory and copy_async.
  virtual Status write_i32_async(int32_t* dst, int32_t value, StreamHandle stream);
  // Records an event after the work queued so far on `stream` (for waits: it may keep
  // no timestamp).
  virtual Result<EventHandle> record_event(StreamHandle stream) = 0;
  // The same, with a timestamp for elapsed_ms (benchmarks). Defaults to record_event.
  virtual Result<EventHandle> record_timing_event(StreamHandle stream);
  // Blocks the host until the event completes; `wait_event` then `destroy_event`.
  virtual Status wait_event(EventHandle event) = 0;
  // Makes work queued on `stream` from now on wait for the event, without blocking the
  // host; the event may be destroyed right after. Defaults to a host wait.
  virtual Status stream_wait_event(StreamHandle stream, EventHandle event);
  virtual void destroy_event(EventHandle event) = 0;
  // Blocks the host until all work queued on `stream` completes.
  virtual Status synchronize(StreamHandle stream) = 0;
  // Milliseconds between two completed events from record_timing_event (benchmarks);
  // NotSupported where the device keeps no timestamps (the host).
  virtual Result<float> elapsed_ms(EventHandle start, EventHandle end);
};

// The host target's API: everything is host memory, copies are memcpy, work is
// synchronous, so streams and events are null and waits return at once.
DeviceApi& host_device_api();

// Restores the calling thread's current device when it goes out of scope, on every
// return path (C4). Construct it before touching the device; check status().
class CurrentDeviceGuard {
 public:
  explicit CurrentDeviceGuard(DeviceApi& api);
  ~CurrentDeviceGuard();
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

  // Error if the current device could not be read (then nothing will be restored).
  const Status& status() const { return status_; }

 private:
  DeviceApi& api_;
  Device saved_;
  Status status_;
};

}  // namespace kvrt::engine
