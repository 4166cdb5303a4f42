#include "kvrt/delegate/test/fake_device.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "kvrt/engine/cpu/cpu_engine.h"

namespace kvrt::delegate::testing {

Result<Device> FakeDeviceApi::current_device() const {
  return current;
}

Status FakeDeviceApi::set_current_device(Device device) {
  if (!device.is_cuda()) return invalid_argument("fake device cannot select ", device.to_string());
  current = device;
  return Status();
}

bool FakeDeviceApi::is_engine_accessible(const TensorView& view) const {
  std::lock_guard lock(mutex_);
  if (!view.device().is_cuda() || view.device().index != 0) return false;
  const auto* p = static_cast<const std::byte*>(view.data());
  for (const auto* ranges : {&device_ranges_, &registered_ranges_}) {
    for (const auto& [begin, size] : *ranges) {
      if (p >= begin && p < begin + size) return true;
    }
  }
  return false;
}

Result<void*> FakeDeviceApi::allocate(size_t bytes) {
  if (fail_allocations > 0) {
    --fail_allocations;
    return allocation_failed("injected device allocation failure");
  }
  void* ptr = std::malloc(bytes == 0 ? 1 : bytes);
  if (ptr == nullptr) return allocation_failed("fake device allocation");
  std::lock_guard lock(mutex_);
  device_ranges_.emplace_back(static_cast<const std::byte*>(ptr), bytes);
  return ptr;
}

void FakeDeviceApi::free(void* ptr) {
  std::lock_guard lock(mutex_);
  std::erase_if(device_ranges_, [ptr](const auto& r) { return r.first == ptr; });
  std::free(ptr);
}

Status FakeDeviceApi::fill_zero(void* ptr, size_t bytes) {
  std::memset(ptr, 0, bytes);
  return Status();
}

Result<engine::StreamHandle> FakeDeviceApi::create_stream() {
  std::lock_guard lock(mutex_);
  streams_.push_back(std::make_unique<Stream>());
  return static_cast<engine::StreamHandle>(streams_.back().get());
}

void FakeDeviceApi::destroy_stream(engine::StreamHandle stream) {
  std::lock_guard lock(mutex_);
  run_until(*static_cast<Stream*>(stream), ~uint64_t{0});
  std::erase_if(streams_, [stream](const auto& s) { return s.get() == stream; });
}

void FakeDeviceApi::submit(engine::StreamHandle stream, std::function<void()> work) {
  std::lock_guard lock(mutex_);
  Stream& s = *static_cast<Stream*>(stream);
  s.queue.push_back(std::move(work));
  ++s.submitted;
}

Status FakeDeviceApi::copy_async(void* dst, const void* src, size_t bytes,
                                 engine::StreamHandle stream) {
  std::lock_guard lock(mutex_);
  if (engine_runs_queued > 0 && fail_copies_after_enqueue > 0) {
    --fail_copies_after_enqueue;
    return internal_error("injected copy failure");
  }
  copied_bytes += static_cast<int64_t>(bytes);
  submit(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  return Status();
}

Result<engine::EventHandle> FakeDeviceApi::record_event(engine::StreamHandle stream) {
  std::lock_guard lock(mutex_);
  if (fail_record_event) return internal_error("injected event failure");
  Stream* s = static_cast<Stream*>(stream);
  return static_cast<engine::EventHandle>(new Event{s, s->submitted});
}

Status FakeDeviceApi::wait_event(engine::EventHandle event) {
  std::lock_guard lock(mutex_);
  ++host_waits;
  const Event* e = static_cast<const Event*>(event);
  run_until(*e->stream, e->sequence);
  return Status();
}

Status FakeDeviceApi::stream_wait_event(engine::StreamHandle stream, engine::EventHandle event) {
  std::lock_guard lock(mutex_);
  ++device_waits;
  const Event waited = *static_cast<const Event*>(event);  // the handle may go at once
  submit(stream, [this, waited] { run_until(*waited.stream, waited.sequence); });
  return Status();
}

void FakeDeviceApi::destroy_event(engine::EventHandle event) {
  delete static_cast<Event*>(event);
}

Status FakeDeviceApi::synchronize(engine::StreamHandle stream) {
  std::lock_guard lock(mutex_);
  ++host_waits;
  run_until(*static_cast<Stream*>(stream), ~uint64_t{0});
  return Status();
}

void FakeDeviceApi::run_until(Stream& stream, uint64_t sequence) {
  while (!stream.queue.empty() && stream.completed < sequence) {
    std::function<void()> work = std::move(stream.queue.front());
    stream.queue.pop_front();
    work();
    ++stream.completed;
  }
}

void FakeDeviceApi::register_device_memory(const void* ptr, size_t bytes) {
  std::lock_guard lock(mutex_);
  registered_ranges_.emplace_back(static_cast<const std::byte*>(ptr), bytes);
}

void FakeDeviceApi::forget_registered_memory() {
  std::lock_guard lock(mutex_);
  registered_ranges_.clear();
}

uint64_t FakeDeviceApi::pending() const {
  std::lock_guard lock(mutex_);
  uint64_t total = 0;
  for (const auto& s : streams_) total += s->queue.size();
  return total;
}

FakeDeviceApi& fake_device() {
  static FakeDeviceApi api;
  return api;
}

FakeEngineOptions& fake_engine_options() {
  static FakeEngineOptions options;
  return options;
}
std::atomic<int>& engines_destroyed_in_flight() {
  static std::atomic<int> count{0};
  return count;
}
std::atomic<int>& reconfigured_in_flight() {
  static std::atomic<int> count{0};
  return count;
}
std::atomic<int>& concurrent_engine_calls() {
  static std::atomic<int> count{0};
  return count;
}

namespace {

// The CPU engine behind a device face: enqueue only queues the run.
class FakeDeviceEngine final : public engine::Engine {
 public:
  explicit FakeDeviceEngine(std::unique_ptr<engine::Engine> inner) : inner_(std::move(inner)) {}
  ~FakeDeviceEngine() override {
    if (queued_ > 0) {
      ++engines_destroyed_in_flight();
      while (queued_ > 0) std::this_thread::yield();  // never reached in a passing test
    }
  }
  Device device() const override { return Device::cuda(0); }
  std::span<const engine::TensorInfo> inputs() const override { return inner_->inputs(); }
  std::span<const engine::TensorInfo> outputs() const override { return inner_->outputs(); }
  std::optional<std::string> aliased_input(std::string_view name) const override {
    return inner_->aliased_input(name);
  }
  bool enqueue_snapshots_bindings() const override {
    return fake_engine_options().snapshot_bindings;
  }
  Status set_tensor(std::string_view name, void* data, const Shape& shape) override {
    Busy busy(*this);
    if (enqueue_snapshots_bindings()) {
      for (const engine::TensorInfo& info : inner_->outputs()) {
        if (info.name == name) bound_output_shapes_[info.name] = shape;
      }
      next_bindings_[std::string(name)] = {data, shape};
      return Status();
    }
    if (queued_ > 0) {
      ++reconfigured_in_flight();
      return internal_error("engine reconfigured while a run is in flight");
    }
    for (const engine::TensorInfo& info : inner_->outputs()) {
      if (info.name == name) bound_output_shapes_[info.name] = shape;
    }
    return inner_->set_tensor(name, data, shape);
  }
  Status enqueue(engine::StreamHandle stream) override {
    Busy busy(*this);
    FakeDeviceApi& api = fake_device();
    api.enqueue_streams.push_back(stream);
    ++queued_;
    ++api.engine_runs_queued;
    std::map<std::string, std::pair<void*, Shape>> bindings;
    if (enqueue_snapshots_bindings()) bindings = next_bindings_;
    api.submit(stream, [this, &api, bindings = std::move(bindings)] {
      for (const auto& [name, binding] : bindings) {
        last_run_ = inner_->set_tensor(name, binding.first, binding.second);
        if (!last_run_.ok()) break;
      }
      if (last_run_.ok()) last_run_ = inner_->enqueue(nullptr);
      --queued_;
      --api.engine_runs_queued;
    });
    return Status();
  }
  Result<Shape> output_shape(std::string_view name) const override {
    if (fake_engine_options().output_shape_override) {
      return *fake_engine_options().output_shape_override;
    }
    auto it = bound_output_shapes_.find(std::string(name));
    if (it == bound_output_shapes_.end()) return not_found("no output '", name, "'");
    return it->second;
  }

 private:
  struct Busy {
    explicit Busy(FakeDeviceEngine& e) : engine(e) {
      if (engine.busy_.exchange(true)) ++concurrent_engine_calls();
    }
    ~Busy() { engine.busy_ = false; }
    FakeDeviceEngine& engine;
  };
  std::unique_ptr<engine::Engine> inner_;
  std::map<std::string, Shape> bound_output_shapes_;
  std::map<std::string, std::pair<void*, Shape>> next_bindings_;  // snapshot mode
  std::atomic<int> queued_{0};
  std::atomic<bool> busy_{false};
  Status last_run_;
};

}  // namespace

engine::EngineTarget fake_cuda_target() {
  engine::EngineTarget target;
  target.name = "fake-cuda";
  target.device_type = DeviceType::kCuda;
  target.build =
      [](std::span<const std::byte> payload, const engine::WeightProvider& weights,
         const engine::EngineOptions& options) -> Result<std::unique_ptr<engine::Engine>> {
    engine::EngineOptions cpu_options = options;
    cpu_options.device = Device::cpu();
    cpu_options.num_threads = 1;
    KVRT_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> inner,
                          engine::cpu::build_cpu_engine(payload, weights, cpu_options));
    return std::unique_ptr<engine::Engine>(std::make_unique<FakeDeviceEngine>(std::move(inner)));
  };
  target.device_api = [](int index) -> Result<engine::DeviceApi*> {
    if (index != 0) return invalid_argument("the fake has only cuda:0");
    return &fake_device();
  };
  return target;
}

}  // namespace kvrt::delegate::testing
