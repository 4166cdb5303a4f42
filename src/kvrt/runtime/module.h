// Module: the convenience layer over Program and Method for a language model. Load a
// program file, then prefill a prompt and decode one token at a time; the KV cache
// lives in the program's mutable buffers, shared by every method, so decode continues
// where prefill stopped. Not thread-safe: one Module serves one sequence at a time.
//
//   auto module = Module::load("model.kvrt");           // or Module::create(program)
//   auto logits = (*module)->prefill(prompt_ids, 0);    // [vocab] of the last token
//   logits = (*module)->decode(next_id, prompt.size()); // one token at its position
//   (*module)->reset();                                 // zero caches: new sequence
#pragma once

#include <cstdint>
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
  // The loaded method, or nullptr.
  Method* method(std::string_view name);
  std::vector<std::string> method_names() const;

  Module() = default;

 private:
  std::shared_ptr<const Program> program_;
  std::unique_ptr<BufferSet> buffers_;  // before methods_: outlives them
  std::vector<std::unique_ptr<Method>> methods_;
  const Method* last_ = nullptr;
  StepStats empty_stats_;
  int64_t vocab_size_ = 0;
  int64_t max_seq_len_ = 0;
};

}  // namespace kvrt::runtime
