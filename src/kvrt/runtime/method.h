// Method: one method of a loaded program (prefill, decode), ready to execute. Load
// allocates its arenas per the memory plan, initializes its delegates and prepares its
// host kernels; execute runs the instruction list:
//
//   delegate_call  args (values) -> DelegateHandle::execute, outputs resized (D5)
//   host_kernel    the CPU engine's op implementation on host views
//   copy           nbytes from one value's storage to another's (the F3 path)
//
// Values live in one of four places: caller inputs, a planned arena slot, a mutable
// buffer (shared with the other methods through the BufferSet), or a weight.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/delegate/backend.h"
#include "kvrt/engine/cpu/ops.h"
#include "kvrt/engine/cpu/thread_pool.h"
#include "kvrt/runtime/memory.h"
#include "kvrt/runtime/program.h"

namespace kvrt::runtime {

struct MethodOptions {
  Device device = Device::cpu();  // where the engine delegates run
  int num_threads = 0;            // CPU engine and host kernel threads; 0 = default
  // The stream every instruction runs on (E1); null: the method makes its own. Methods
  // that share one stream are ordered among themselves without host waits.
  engine::StreamHandle stream = nullptr;
};

struct RunOptions {
  // Caller storage for outputs, by output index (a view with null data, or fewer views,
  // keeps the planned slot): same dtype and device as the planned slot, contiguous, at least
  // its largest size. Lets the next call read an output where this one writes it.
  std::span<const TensorView> outputs;
  // false: return once the work is queued (no host wait); the outputs are ready after
  // synchronize(). Any host kernel still waits for the device work before it.
  bool synchronize = true;
  // A run of greedy decode steps in one submission (1 to Method::max_steps()): call i
  // takes call i - 1's step output (the greedy token) as its token and runs at
  // position + i. The step output's caller storage (in `outputs`) receives one token
  // per step, [steps, 1]; the other outputs hold the last call's values.
  int steps = 1;
};

// Bytes copied by the last execute, per mutable buffer: copy instructions plus
// delegate staging and reflect copies of arguments stored in that buffer. Zero for a
// cache bound directly (F2); the copy-path cost for a buffer a host kernel uses (F3).
struct StepStats {
  std::vector<std::string> buffer_names;  // program buffer order
  std::vector<int64_t> buffer_bytes;      // parallel to buffer_names
  int64_t copy_instruction_bytes = 0;     // all copy instructions
  int64_t delegate_bytes = 0;             // all delegate staging and reflect copies

  int64_t total_buffer_bytes() const;
  // Bytes for one buffer; 0 for an unknown name.
  int64_t bytes_for(std::string_view buffer) const;
};

class Method {
 public:
  // Loads method `name` of `program`, binding its buffer values to `buffers`. Checks,
  // before any execute, that every delegate call's argument value names equal its
  // blob's binding names in order (A3): a blob whose bindings are in another order is
  // InvalidProgram here. Also InvalidProgram for an op unknown to the host kernels or
  // a host kernel touching device memory; NotFound for a missing method or backend.
  static Result<std::unique_ptr<Method>> load(std::shared_ptr<const Program> program,
                                              std::string_view name, BufferSet& buffers,
                                              const MethodOptions& options);
  ~Method();

  // Runs the method on `inputs` (in spec().inputs order: tokens i32 [1,T], position
  // i32 [1]). Returns views of the outputs, valid until the next execute. Inputs are
  // checked (dtype, shape within bounds, contiguity) before anything runs.
  Result<std::span<const TensorView>> execute(std::span<const TensorView> inputs,
                                              const RunOptions& options = {});
  // Waits for all work the method queued on its stream.
  Status synchronize();
  // The longest run of steps one execute takes (1: one call per execute), and the
  // output that carries the steps' tokens (-1: none).
  int max_steps() const { return max_steps_; }
  int step_output() const { return step_output_; }

  const format::MethodSpec& spec() const { return *spec_; }
  engine::StreamHandle stream() const { return stream_; }
  engine::DeviceApi& device_api() const { return *api_; }
  const StepStats& last_stats() const { return stats_; }

  Method() = default;

 private:
  struct Call {
    std::unique_ptr<delegate::DelegateHandle> handle;
    std::vector<TensorView> args;  // scratch, reused
  };
  struct HostOp {
    engine::cpu::PreparedOp op;
  };

  Status init_storage();
  Status init_instructions();
  void find_step_output();
  Status check_steps(const RunOptions& options) const;
  Status check_inputs(std::span<const TensorView> inputs) const;
  Status check_output_storage(std::span<const TensorView> outputs) const;
  // Points output values at the caller's storage for one execute; restores on scope exit.
  class OutputOverride;
  Status run_call(size_t instruction, const format::DelegateCall& call, Call& state, int steps);
  Status run_host_kernel(const format::HostKernel& kernel, const HostOp& op);
  Status run_copy(const format::CopyInstruction& copy);
  std::string where(size_t instruction) const;
  // Storage of value `v` at its largest shape (capacity view).
  TensorView capacity_view(format::ValueIndex v) const;
  int buffer_index(format::ValueIndex v) const;

  std::shared_ptr<const Program> program_;
  const format::MethodSpec* spec_ = nullptr;
  BufferSet* buffers_ = nullptr;
  MethodOptions options_;
  engine::DeviceApi* api_ = nullptr;
  engine::StreamHandle stream_ = nullptr;
  bool owns_stream_ = false;
  std::shared_ptr<engine::cpu::ThreadPool> pool_;
  Allocation device_arena_, host_arena_;

  std::vector<std::byte*> base_;     // per value: storage (null for inputs)
  std::vector<Device> device_of_;    // per value
  std::vector<Shape> max_shape_;     // per value
  std::vector<int> buffer_of_;       // per value: index in buffers_->buffers(), or -1
  std::vector<TensorView> current_;  // per value: view at its current shape
  std::vector<Call> calls_;          // per instruction (delegate calls only)
  std::vector<HostOp> host_ops_;     // per instruction (host kernels only)
  std::vector<TensorView> outputs_;
  StepStats stats_;
  int max_steps_ = 1;
  int step_output_ = -1;
};

}  // namespace kvrt::runtime
