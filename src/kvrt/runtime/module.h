// Module: the convenience layer over Program and Method for a language model. Load a
// program file, then prefill a prompt and decode one token at a time; the KV cache
// lives in the program's mutable buffers, shared by every method, so decode continues
// where prefill stopped. Not thread-safe: one Module serves one sequence at a time.
//
//   auto module = Module::load("model.kvrt");           // or Module::create(program)
//   auto logits = (*module)->prefill(prompt_ids, 0);    // [vocab] of the last token
//   logits = (*module)->decode(next_id, prompt.size()); // one token at its position
//   (*module)->reset();                                 // zero caches: new sequence
//
// Greedy decoding without a host round trip (methods with a `next_token` output):
//
//   module->submit_greedy("prefill", prompt_ids, 0);  // the token stays on the device
//   module->submit_greedy_continuation(n);            // decode it at position n, queued
//   int32_t first = *module->wait_token();            // the prefill's token, as decided
//   module->submit_greedy_continuation(n + 1);        // queued before waiting again
//   int32_t second = *module->wait_token();
//
// Where the engine runs several decode steps in one submission (max_greedy_steps() > 1),
// submit_greedy_continuation(n, k) queues k steps at positions n..n+k-1, each on the
// token the one before chose; wait_token() returns their tokens one at a time.
//
// Every method runs on the module's one stream, so calls are ordered on the device and
// only wait_token (and the logits-returning calls) wait on the host.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/runtime/memory.h"
#include "kvrt/runtime/method.h"
#include "kvrt/runtime/program.h"

namespace kvrt::runtime {

inline constexpr std::string_view kPrefillMethod = "prefill";
inline constexpr std::string_view kDecodeMethod = "decode";

struct ModuleOptions {
  Device device = Device::cpu();  // where the engine delegates run
  int num_threads = 0;            // CPU threads; 0 = default
  // Most greedy decode steps one continuation queues. 0: up to 8 on a device; 1 on the
  // CPU, where a step runs inside the call, so a run would only hold back the first
  // token and compute steps a stop then discards.
  int max_greedy_steps = 0;
};

class Module {
 public:
  // Maps and verifies `path`, allocates the buffers (zeroed, F4) and loads every
  // method (delegates initialized, argument order checked).
  static Result<std::unique_ptr<Module>> load(const std::string& path,
                                              const ModuleOptions& options = {});
  static Result<std::unique_ptr<Module>> create(std::shared_ptr<const Program> program,
                                                const ModuleOptions& options = {});

  // Runs `method` with tokens [1, T] starting at absolute position `position`; returns
  // the logits of the last token, [vocab] f32, valid until the next call. Errors name
  // the method and instruction; on a rejected input the caches are unchanged.
  Result<std::span<const float>> run(std::string_view method, std::span<const int32_t> tokens,
                                     int32_t position);
  // run("prefill", tokens, position).
  Result<std::span<const float>> prefill(std::span<const int32_t> tokens, int32_t position);
  // run("decode", {token}, position).
  Result<std::span<const float>> decode(int32_t token, int32_t position);

  // True when prefill and decode choose the greedy token themselves (`next_token`).
  bool has_device_greedy() const;
  // Queues `method` on `tokens` at `position` (checked as run() checks them); its
  // greedy token is kept on the device for a continuation and read back by
  // wait_token(). Starts a new run of steps: tokens still queued are dropped.
  Status submit_greedy(std::string_view method, std::span<const int32_t> tokens, int32_t position);
  // Queues `steps` decode steps at `position`.. on the token the last submitted step
  // chooses, read where that step writes it: the host does not wait for it. Each step
  // decodes the token the one before it chose. 1 <= steps <= max_greedy_steps().
  Status submit_greedy_continuation(int32_t position, int steps = 1);
  // The most decode steps one continuation queues (1: the engine runs one per call).
  int max_greedy_steps() const { return max_greedy_steps_; }
  // Waits for the oldest queued step and returns its token. InvalidState when
  // nothing is queued.
  Result<int32_t> wait_token();
  // Tokens queued and not yet returned by wait_token().
  size_t queued_tokens() const;

  // Zeroes every mutable buffer: the next prefill starts a fresh sequence.
  Status reset();

  int64_t vocab_size() const { return vocab_size_; }
  // Cache capacity in tokens (dim 1 of the caches), 0 if the program has no buffers.
  int64_t max_seq_len() const { return max_seq_len_; }
  // Largest T the method accepts in one call (its tokens input bound).
  Result<int64_t> max_tokens(std::string_view method) const;

  // Bytes copied per buffer by the last run (0 for a directly bound cache, F2).
  const StepStats& last_stats() const;
  const Program& program() const { return *program_; }
  // The stream every method runs on, and its device's API (events, copies).
  engine::StreamHandle stream() const { return stream_; }
  engine::DeviceApi& device_api() const { return *api_; }
  // The loaded method, or nullptr.
  Method* method(std::string_view name);
  std::vector<std::string> method_names() const;

  Module() = default;
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

 private:
  // Where a method's outputs are, by output index (-1: the method lacks it).
  struct Outputs {
    int logits = -1;
    int next_token = -1;
  };
  // A queued submission of `count` greedy steps: their tokens arrive in
  // host_tokens()[slot * kMaxSteps ..] when `done` fires; `taken` were returned.
  struct Pending {
    engine::EventHandle done = nullptr;
    size_t slot = 0;
    int count = 1;
    int taken = 0;
  };
  static constexpr size_t kRing = 8;  // pinned slots for queued submissions
  // Steps per submission: enough to make the per-submission costs (the graph launch, the
  // copy home, the host's turn) small beside the steps, few enough that a stop wastes little.
  static constexpr int kMaxSteps = 8;

  Status init_io();
  Status check_call(std::string_view name, std::span<const int32_t> tokens, int32_t position) const;
  Result<size_t> method_index(std::string_view name) const;
  Status submit(size_t method, const TensorView& tokens, int32_t position, int steps);
  Status drain_queue();
  int32_t* device_token_slot(size_t k) const;
  int32_t* device_position() const;
  int32_t* device_tokens() const;
  float* host_logits() const;
  int32_t* host_tokens() const;     // [kRing * kMaxSteps]
  int32_t* host_positions() const;  // [kRing]
  int32_t* host_staging() const;    // [max tokens]

  std::shared_ptr<const Program> program_;
  engine::DeviceApi* api_ = nullptr;
  Device device_;
  engine::StreamHandle stream_ = nullptr;  // every method's; outlives them
  std::unique_ptr<BufferSet> buffers_;     // before methods_: outlives them
  std::vector<std::unique_ptr<Method>> methods_;
  std::vector<Outputs> outputs_;  // per method
  int64_t max_call_tokens_ = 0;
  Allocation device_io_, host_io_;
  std::deque<Pending> pending_;
  size_t submitted_ = 0;
  size_t token_slot_ = 0;  // device slot the last greedy submission wrote
  int token_count_ = 1;    // tokens it wrote there; the last is the next step's input
  int max_greedy_steps_ = 1;
  int greedy_steps_option_ = 0;  // ModuleOptions::max_greedy_steps
  const Method* last_ = nullptr;
  StepStats empty_stats_;
  int64_t vocab_size_ = 0;
  int64_t max_seq_len_ = 0;
};

}  // namespace kvrt::runtime
