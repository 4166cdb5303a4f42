// What the generation loop needs from a model: run some tokens at a position and get
// the last token's logits. The runtime's Module implements it (runtime/module_model.h);
// tests implement it with tiny hand-written models.
#pragma once

#include <cstdint>
#include <span>

#include "kvrt/core/result.h"

namespace kvrt {

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  // Runs tokens at positions [position, position + tokens.size()) and returns the
  // logits of the last one (valid until the next call). The KV cache keeps the rows.
  virtual Result<std::span<const float>> forward(std::span<const int32_t> tokens,
                                                 int32_t position) = 0;
  // Most positions the cache holds (the context length).
  virtual int32_t max_context() const = 0;
  // Most tokens one forward call takes; longer prompts are fed in chunks.
  virtual int32_t max_chunk() const = 0;
  // Clears the KV cache.
  virtual Status reset() = 0;
  // Bytes the runtime copied for the KV cache during the last forward call (0 when
  // the cache is bound in place).
  virtual uint64_t cache_bytes_copied_last_call() const { return 0; }

  // Greedy decoding where the model runs (optional). The loop queues a step, then the
  // step that consumes its token, before it waits for the first token, so a device
  // never idles between steps.
  virtual bool can_queue_greedy() const { return false; }
  // Queues tokens at position; the greedy token they produce stays with the model.
  virtual Status queue_greedy(std::span<const int32_t> /*tokens*/, int32_t /*position*/) {
    return not_supported("this model does not queue greedy steps");
  }
  // Queues `steps` decode steps at `position`..: the first on the token the last queued
  // step produces, each next on the token the one before it produces.
  virtual Status queue_greedy_continuation(int32_t /*position*/, int32_t /*steps*/) {
    return not_supported("this model does not queue greedy steps");
  }
  // The most steps one continuation queues (a model that runs several per submission).
  virtual int32_t max_queued_steps() const { return 1; }
  // Waits for the oldest queued step and returns its greedy token.
  virtual Result<int32_t> wait_greedy_token() {
    return not_supported("this model does not queue greedy steps");
  }
};

}  // namespace kvrt
