// The generation loop: prefill the prompt, then decode one token at a time, sampling,
// streaming text and stopping on EOS, stop strings or limits. Names follow the phases:
// prefill, decode_one_token. The position persists between calls, so a chat keeps its
// cache across turns until reset().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/generation/language_model.h"
#include "kvrt/generation/sampler.h"
#include "kvrt/generation/sampling_stop.h"
#include "kvrt/generation/tokenizer.h"

namespace kvrt {

struct GenerateOptions {
  int32_t max_new_tokens = 128;
  SamplingParams sampling;  // temperature 0: greedy
  std::vector<std::string> stop_strings;
  std::vector<int32_t> eos_ids;  // tokens that end generation
  bool ignore_eos = false;       // generate exactly max_new_tokens (benchmarks, checks)
};

struct GenerationStats {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double time_to_first_token_ms = 0;  // prompt in → first token sampled
  double prefill_ms = 0;
  double decode_ms = 0;
  double prefill_tokens_per_second = 0;
  double decode_tokens_per_second = 0;
  // KV-cache bytes the runtime copied per decode step (0: bound in place).
  uint64_t cache_bytes_copied_per_step = 0;
  // generate_sequence(): leading tokens of the sequence already in the cache, not
  // prefilled again (prompt_tokens counts only the tokens that were).
  int32_t cached_tokens = 0;
  StopReason stop_reason = StopReason::kNone;
};

struct GenerationResult {
  std::vector<int32_t> ids;  // generated ids (the EOS that stopped it included)
  std::string text;          // generated text, as streamed (without EOS or stop string)
  GenerationStats stats;
};

// Receives each piece of text as it becomes final, with the id that produced it.
// Returning false stops generation (stop reason kNone: stopped by the caller).
using TokenCallback = std::function<bool(std::string_view text, int32_t id)>;

class Generator {
 public:
  // Without a tokenizer the loop runs on ids alone and produces no text.
  Generator(LanguageModel& model, std::optional<Tokenizer> tokenizer)
      : model_(model), tokenizer_(std::move(tokenizer)) {}

  // Appends prompt_ids at the current position and generates. InvalidArgument when the
  // prompt is empty or does not fit the context; the cache is then untouched.
  Result<GenerationResult> generate(std::span<const int32_t> prompt_ids,
                                    const GenerateOptions& options,
                                    const TokenCallback& on_text = {});

  // Generates after the whole token sequence `sequence` (a full conversation, not a
  // continuation): the longest prefix it shares with tokens() stays in the cache and
  // only the rest is prefilled (at least one token, for the logits). A sequence that
  // does not extend the cached one rewinds to where they part. InvalidArgument when it
  // is empty or longer than the context. stats.cached_tokens says how many were reused.
  Result<GenerationResult> generate_sequence(std::span<const int32_t> sequence,
                                             const GenerateOptions& options,
                                             const TokenCallback& on_text = {});

  // The sequence so far: prompts and generated tokens, in order. All but possibly the
  // last (the pending token) are in the cache.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Keeps the first `length` tokens of tokens() and forgets the rest; the cache rows
  // past them are overwritten by what comes next (attention reads only positions below
  // the current one). InvalidArgument when length > tokens().size().
  Status rewind(size_t length);

  // Stops a generate() running on another thread after its current token.
  void request_stop() { stop_requested_.store(true); }
  // Clears the cache and the position.
  Status reset();
  int32_t position() const { return position_; }
  const std::optional<Tokenizer>& tokenizer() const { return tokenizer_; }

 private:
  Result<std::span<const float>> prefill(std::span<const int32_t> prompt_ids);
  Result<std::span<const float>> decode_one_token(int32_t token);
  using TakeToken = std::function<Result<bool>(int32_t token)>;
  Status generate_queued(std::span<const int32_t> prompt_ids, const GenerateOptions& options,
                         const TakeToken& take, GenerationStats& stats, uint64_t& cache_bytes);

  Result<GenerationResult> generate_unchecked(std::span<const int32_t> prompt_ids,
                                              const GenerateOptions& options,
                                              const TokenCallback& on_text);

  LanguageModel& model_;
  std::optional<Tokenizer> tokenizer_;
  int32_t position_ = 0;
  // Invariant: tokens_.size() == position_ + (pending_token_ ? 1 : 0).
  std::vector<int32_t> tokens_;
  // The last sampled token has not been run through the model yet; the next turn
  // feeds it first so the cache holds the whole conversation.
  std::optional<int32_t> pending_token_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace kvrt
