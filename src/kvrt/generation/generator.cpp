#include "kvrt/generation/generator.h"

#include <algorithm>
#include <chrono>

namespace kvrt {
namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

Result<std::span<const float>> Generator::prefill(std::span<const int32_t> prompt_ids) {
  std::span<const float> logits;
  const size_t chunk = static_cast<size_t>(std::max(1, model_.max_chunk()));
  for (size_t begin = 0; begin < prompt_ids.size(); begin += chunk) {
    const auto piece = prompt_ids.subspan(begin, std::min(chunk, prompt_ids.size() - begin));
    KVRT_ASSIGN_OR_RETURN(logits, model_.forward(piece, position_));
    position_ += static_cast<int32_t>(piece.size());
  }
  return logits;
}

Result<std::span<const float>> Generator::decode_one_token(int32_t token) {
  const int32_t ids[1] = {token};
  KVRT_ASSIGN_OR_RETURN(auto logits, model_.forward(ids, position_));
  position_ += 1;
  return logits;
}

// Greedy on the model's device: the step that consumes token t is queued before the
// loop waits for t, so the device goes from step to step without waiting for the host.
// Steps are queued in runs (as many as the model takes per submission), one run ahead
// of the tokens being taken. When t ends generation, the step that consumes it has
// already written t into the cache: the position moves past it, and the tokens queued
// after t are discarded, never shown (the rows they wrote lie past the position, where
// every later step writes before it reads).
Status Generator::generate_queued(std::span<const int32_t> prompt_ids,
                                  const GenerateOptions& options, const TakeToken& take,
                                  GenerationStats& stats, uint64_t& cache_bytes) {
  const auto prefill_start = Clock::now();
  const size_t chunk = static_cast<size_t>(std::max(1, model_.max_chunk()));
  const size_t head = (prompt_ids.size() - 1) / chunk * chunk;  // all but the last chunk
  if (head > 0) {
    KVRT_RETURN_IF_ERROR(prefill(prompt_ids.first(head)).status());
  }
  KVRT_RETURN_IF_ERROR(model_.queue_greedy(prompt_ids.subspan(head), position_));
  position_ += static_cast<int32_t>(prompt_ids.size() - head);
  const int32_t run = std::max(1, model_.max_queued_steps());
  int32_t queued = 1;             // tokens queued and not yet taken
  int32_t next_step = position_;  // where the next queued step runs
  bool first = true;
  for (int32_t taken = 0;; ++taken) {
    // A run beyond the token about to be taken, within max_new_tokens and the context.
    while (queued <= run) {
      const int32_t steps = std::min(
          {run, options.max_new_tokens - (taken + queued), model_.max_context() - next_step});
      if (steps <= 0) break;
      KVRT_RETURN_IF_ERROR(model_.queue_greedy_continuation(next_step, steps));
      next_step += steps;
      queued += steps;
    }
    KVRT_ASSIGN_OR_RETURN(int32_t token, model_.wait_greedy_token());
    queued -= 1;
    const bool may_continue = next_step > position_;  // a queued step consumes `token`
    if (first) {
      stats.prefill_ms = milliseconds_since(prefill_start);
      first = false;
    }
    cache_bytes = std::max(cache_bytes, model_.cache_bytes_copied_last_call());
    KVRT_ASSIGN_OR_RETURN(bool keep_going, take(token));
    if (!keep_going || !may_continue) {
      if (may_continue) {
        position_ += 1;  // the queued step ran `token`; what it and later ones chose is dropped
        for (; queued > 0; --queued) KVRT_RETURN_IF_ERROR(model_.wait_greedy_token().status());
      } else {
        pending_token_ = token;
      }
      return Status();
    }
    position_ += 1;
  }
}

Result<GenerationResult> Generator::generate(std::span<const int32_t> prompt_ids,
                                             const GenerateOptions& options,
                                             const TokenCallback& on_text) {
  const size_t known = tokens_.size();
  Result<GenerationResult> result = generate_unchecked(prompt_ids, options, on_text);
  if (result.ok()) {
    tokens_.insert(tokens_.end(), prompt_ids.begin(), prompt_ids.end());
    tokens_.insert(tokens_.end(), result->ids.begin(), result->ids.end());
  } else if (static_cast<size_t>(position_) + (pending_token_ ? 1 : 0) != known) {
    // A failure after the model was touched leaves rows nobody can name: start over
    // rather than continue a sequence that is not what tokens() says.
    (void)reset();
  }
  return result;
}

Result<GenerationResult> Generator::generate_sequence(std::span<const int32_t> sequence,
                                                      const GenerateOptions& options,
                                                      const TokenCallback& on_text) {
  if (sequence.empty()) return invalid_argument("the prompt has no tokens");
  if (sequence.size() > static_cast<size_t>(model_.max_context())) {
    return invalid_argument("prompt of ", sequence.size(),
                            " tokens does not fit the model's context of ", model_.max_context(),
                            " tokens");
  }
  const auto parted =
      std::mismatch(tokens_.begin(), tokens_.end(), sequence.begin(), sequence.end());
  // At least the last token is fed again: its logits are what the next token comes from.
  const size_t keep =
      std::min(static_cast<size_t>(parted.first - tokens_.begin()), sequence.size() - 1);
  KVRT_RETURN_IF_ERROR(rewind(keep));
  const int32_t cached = position_;  // a pending token is kept but fed again
  KVRT_ASSIGN_OR_RETURN(GenerationResult result,
                        generate(sequence.subspan(keep), options, on_text));
  result.stats.cached_tokens = cached;
  return result;
}

Status Generator::rewind(size_t length) {
  if (length > tokens_.size()) {
    return invalid_argument("cannot rewind to ", length, " tokens: the sequence has ",
                            tokens_.size());
  }
  if (length == tokens_.size()) return Status();
  tokens_.resize(length);
  position_ = static_cast<int32_t>(length);  // length < size: at most position_
  pending_token_.reset();
  return Status();
}

Result<GenerationResult> Generator::generate_unchecked(std::span<const int32_t> prompt_ids,
                                                       const GenerateOptions& options,
                                                       const TokenCallback& on_text) {
  stop_requested_.store(false);
  if (prompt_ids.empty()) return invalid_argument("the prompt has no tokens");
  std::vector<int32_t> turn_ids;
  if (pending_token_) {
    turn_ids.push_back(*pending_token_);
    turn_ids.insert(turn_ids.end(), prompt_ids.begin(), prompt_ids.end());
    prompt_ids = turn_ids;
  }
  const int64_t context_after_prompt = int64_t{position_} + static_cast<int64_t>(prompt_ids.size());
  if (context_after_prompt > model_.max_context()) {
    return invalid_argument("prompt of ", prompt_ids.size(), " tokens at position ", position_,
                            " does not fit the model's context of ", model_.max_context(),
                            " tokens");
  }
  StopParams stop_params;
  if (!options.ignore_eos) stop_params.eos_ids = options.eos_ids;
  stop_params.stop_strings = options.stop_strings;
  stop_params.max_new_tokens = options.max_new_tokens;
  stop_params.max_context = model_.max_context();
  KVRT_ASSIGN_OR_RETURN(
      StopChecker stop,
      StopChecker::create(stop_params, static_cast<size_t>(context_after_prompt)));
  KVRT_ASSIGN_OR_RETURN(SamplerChain sampler, SamplerChain::create(options.sampling));
  sampler.accept(prompt_ids);

  GenerationResult result;
  GenerationStats& stats = result.stats;
  stats.prompt_tokens = static_cast<int32_t>(prompt_ids.size());
  std::optional<StreamDecoder> decoder;
  if (tokenizer_) decoder.emplace(*tokenizer_, /*skip_special_tokens=*/true);

  const auto prefill_start = Clock::now();
  pending_token_.reset();
  auto decode_start = Clock::now();
  uint64_t cache_bytes = 0;
  std::string emit;
  // Takes one generated token: text, stop conditions, the caller. True: go on.
  auto take = [&](int32_t token) -> Result<bool> {
    if (result.ids.empty()) {
      stats.time_to_first_token_ms = milliseconds_since(prefill_start);
      decode_start = Clock::now();
    }
    result.ids.push_back(token);
    std::string piece;
    if (decoder) {
      KVRT_ASSIGN_OR_RETURN(piece, decoder->push(token));
    }
    emit.clear();
    stats.stop_reason = stop.push(token, piece, emit);
    result.text += emit;
    const bool keep_going = !on_text || emit.empty() || on_text(emit, token);
    return stats.stop_reason == StopReason::kNone && keep_going && !stop_requested_.load();
  };

  const SamplingParams& sampling = options.sampling;
  if (sampling.temperature == 0 && sampling.repetition_penalty == 1 && model_.can_queue_greedy()) {
    KVRT_RETURN_IF_ERROR(generate_queued(prompt_ids, options, take, stats, cache_bytes));
  } else {
    KVRT_ASSIGN_OR_RETURN(std::span<const float> logits, prefill(prompt_ids));
    stats.prefill_ms = milliseconds_since(prefill_start);
    while (true) {
      KVRT_ASSIGN_OR_RETURN(int32_t token, sampler.sample(logits));
      KVRT_ASSIGN_OR_RETURN(bool keep_going, take(token));
      if (!keep_going) {
        pending_token_ = token;
        break;
      }
      KVRT_ASSIGN_OR_RETURN(logits, decode_one_token(token));
      cache_bytes = std::max(cache_bytes, model_.cache_bytes_copied_last_call());
    }
  }
  if (stats.stop_reason != StopReason::kStopString) {
    std::string tail;
    if (decoder) {
      KVRT_ASSIGN_OR_RETURN(tail, decoder->flush());
    }
    emit.clear();
    std::string held = stop.flush();
    if (stats.stop_reason != StopReason::kEos) held += tail;
    if (!held.empty()) {
      result.text += held;
      if (on_text) on_text(held, result.ids.back());
    }
  }
  // Decode time covers the steps after the first token: tokens - 1 forward calls.
  stats.generated_tokens = static_cast<int32_t>(result.ids.size());
  stats.decode_ms = milliseconds_since(decode_start);
  stats.cache_bytes_copied_per_step = cache_bytes;
  if (stats.prefill_ms > 0) {
    stats.prefill_tokens_per_second = stats.prompt_tokens / (stats.prefill_ms / 1000.0);
  }
  const int32_t decode_steps = stats.generated_tokens - 1;
  if (decode_steps > 0 && stats.decode_ms > 0) {
    stats.decode_tokens_per_second = decode_steps / (stats.decode_ms / 1000.0);
  }
  return result;
}

Status Generator::reset() {
  position_ = 0;
  pending_token_.reset();
  tokens_.clear();
  KVRT_RETURN_IF_ERROR(model_.reset());
  return Status();
}

}  // namespace kvrt
