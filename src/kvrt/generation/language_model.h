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
};

}  // namespace kvrt
