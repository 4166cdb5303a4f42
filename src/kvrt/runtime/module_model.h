// The runtime's Module as the generation loop's LanguageModel: one-token calls go to
// `decode`, longer ones to `prefill` (the loop chunks prompts by max_chunk()).
#pragma once

#include <memory>

#include "kvrt/generation/language_model.h"
#include "kvrt/runtime/module.h"

namespace kvrt::runtime {

class ModuleModel final : public LanguageModel {
 public:
  explicit ModuleModel(std::unique_ptr<Module> module) : module_(std::move(module)) {}

  Result<std::span<const float>> forward(std::span<const int32_t> tokens,
                                         int32_t position) override {
    if (tokens.size() == 1 && module_->method(kDecodeMethod) != nullptr) {
      return module_->decode(tokens[0], position);
    }
    return module_->prefill(tokens, position);
  }
  int32_t max_context() const override { return static_cast<int32_t>(module_->max_seq_len()); }
  int32_t max_chunk() const override {
    Result<int64_t> tokens = module_->max_tokens(kPrefillMethod);
    return tokens.ok() ? static_cast<int32_t>(*tokens) : 1;
  }
  Status reset() override { return module_->reset(); }
  uint64_t cache_bytes_copied_last_call() const override {
    return static_cast<uint64_t>(module_->last_stats().total_buffer_bytes());
  }
  bool can_queue_greedy() const override { return module_->has_device_greedy(); }
  Status queue_greedy(std::span<const int32_t> tokens, int32_t position) override {
    const bool one = tokens.size() == 1 && module_->method(kDecodeMethod) != nullptr;
    return module_->submit_greedy(one ? kDecodeMethod : kPrefillMethod, tokens, position);
  }
  Status queue_greedy_continuation(int32_t position, int32_t steps) override {
    return module_->submit_greedy_continuation(position, steps);
  }
  int32_t max_queued_steps() const override { return module_->max_greedy_steps(); }
  Result<int32_t> wait_greedy_token() override { return module_->wait_token(); }

  Module& module() { return *module_; }

 private:
  std::unique_ptr<Module> module_;
};

}  // namespace kvrt::runtime
