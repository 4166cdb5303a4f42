#include "kvrt/generation/generator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace kvrt {
namespace {

std::string source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return env ? env : KVRT_SOURCE_DIR;
}

Tokenizer fixture_tokenizer() {
  auto tokenizer = Tokenizer::load(source_dir() + "/tests/fixtures/tokenizers/byte_bpe");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  return *tokenizer;
}

// A model whose next token is always (last token + step) mod vocab, with a peaked
// distribution, and which records every call so tests can check positions.
class CountingModel : public LanguageModel {
 public:
  CountingModel(int32_t vocab, int32_t context, int32_t chunk)
      : vocab_(vocab), context_(context), chunk_(chunk), logits_(static_cast<size_t>(vocab)) {}

  Result<std::span<const float>> forward(std::span<const int32_t> tokens,
                                         int32_t position) override {
    calls.push_back({position, static_cast<int32_t>(tokens.size())});
    if (position + static_cast<int32_t>(tokens.size()) > context_) {
      return invalid_argument("past the context");
    }
    std::fill(logits_.begin(), logits_.end(), 0.0f);
    logits_[static_cast<size_t>((tokens.back() + step) % vocab_)] = 10.0f;
    return std::span<const float>(logits_);
  }
  int32_t max_context() const override { return context_; }
  int32_t max_chunk() const override { return chunk_; }
  Status reset() override {
    ++resets;
    return Status();
  }

  struct Call {
    int32_t position;
    int32_t count;
  };
  std::vector<Call> calls;
  int resets = 0;
  int32_t step = 1;

 private:
  int32_t vocab_, context_, chunk_;
  std::vector<float> logits_;
};

// CountingModel's rule on a pretend device: greedy steps are queued and their tokens
// come back in order; a continuation reads the token its predecessor chose. Every step
// writes its input token into `cache` at its position, as a KV cache would.
class QueuingModel : public LanguageModel {
 public:
  QueuingModel(int32_t vocab, int32_t context, int32_t chunk)
      : vocab_(vocab), context_(context), chunk_(chunk), logits_(static_cast<size_t>(vocab)) {}

  Result<std::span<const float>> forward(std::span<const int32_t> tokens,
                                         int32_t position) override {
    KVRT_RETURN_IF_ERROR(write(tokens, position));
    std::fill(logits_.begin(), logits_.end(), 0.0f);
    logits_[static_cast<size_t>(next(tokens.back()))] = 10.0f;
    return std::span<const float>(logits_);
  }
  int32_t max_context() const override { return context_; }
  int32_t max_chunk() const override { return chunk_; }
  Status reset() override {
    cache.clear();
    queue_.clear();
    return Status();
  }
  bool can_queue_greedy() const override { return queueing; }
  Status queue_greedy(std::span<const int32_t> tokens, int32_t position) override {
    queue_.clear();
    KVRT_RETURN_IF_ERROR(write(tokens, position));
    last_ = next(tokens.back());
    queue_.push_back(last_);
    return Status();
  }
  Status queue_greedy_continuation(int32_t position, int32_t steps) override {
    if (queue_.empty() && !waited_any_) return invalid_state("nothing to continue");
    if (steps < 1 || steps > steps_per_run) return invalid_argument("a run of ", steps);
    runs.push_back(steps);
    for (int32_t i = 0; i < steps; ++i) {
      const int32_t token = last_;
      KVRT_RETURN_IF_ERROR(write(std::span<const int32_t>(&token, 1), position + i));
      last_ = next(token);
      queue_.push_back(last_);
    }
    return Status();
  }
  int32_t max_queued_steps() const override { return steps_per_run; }
  Result<int32_t> wait_greedy_token() override {
    if (queue_.empty()) return invalid_state("nothing queued");
    depth_at_wait.push_back(queue_.size());
    const int32_t token = queue_.front();
    queue_.erase(queue_.begin());
    waited_any_ = true;
    return token;
  }

  std::map<int32_t, int32_t> cache;  // position -> token
  std::vector<size_t> depth_at_wait;
  std::vector<int32_t> runs;  // steps per continuation, in order
  bool queueing = true;       // false: the generator must use forward()
  int32_t steps_per_run = 1;

 private:
  int32_t next(int32_t token) const { return (token + 1) % vocab_; }
  Status write(std::span<const int32_t> tokens, int32_t position) {
    if (position + static_cast<int32_t>(tokens.size()) > context_) {
      return invalid_argument("past the context");
    }
    for (size_t i = 0; i < tokens.size(); ++i)
      cache[position + static_cast<int32_t>(i)] = tokens[i];
    return Status();
  }
  int32_t vocab_, context_, chunk_;
  std::vector<float> logits_;
  std::vector<int32_t> queue_;
  int32_t last_ = 0;
  bool waited_any_ = false;
};

GenerateOptions greedy(int32_t max_new_tokens) {
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.sampling.temperature = 0.0f;
  return options;
}

TEST(Generator, GreedyFollowsTheArgmaxAndStopsAtMaxNewTokens) {
  CountingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  const std::vector<int32_t> prompt = {300, 301, 302};
  auto result = generator.generate(prompt, greedy(5));
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->ids, (std::vector<int32_t>{303, 304, 305, 306, 307}));
  EXPECT_EQ(result->stats.stop_reason, StopReason::kMaxNewTokens);
  EXPECT_EQ(result->stats.prompt_tokens, 3);
  EXPECT_EQ(result->stats.generated_tokens, 5);
  // One prefill call at 0, then a decode call per token except the last.
  ASSERT_EQ(model.calls.size(), 5u);
  EXPECT_EQ(model.calls[0].position, 0);
  EXPECT_EQ(model.calls[0].count, 3);
  for (size_t i = 1; i < model.calls.size(); ++i) {
    EXPECT_EQ(model.calls[i].position, static_cast<int32_t>(2 + i));
    EXPECT_EQ(model.calls[i].count, 1);
  }
}

TEST(Generator, TextEqualsTheDecodeOfTheIds) {
  CountingModel model(1000, 64, 16);
  Tokenizer tokenizer = fixture_tokenizer();
  Generator generator(model, tokenizer);
  std::string streamed;
  auto result = generator.generate(std::vector<int32_t>{400}, greedy(12),
                                   [&](std::string_view text, int32_t) {
                                     streamed += text;
                                     return true;
                                   });
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  auto decoded = tokenizer.decode(result->ids, true);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(result->text, *decoded);
  EXPECT_EQ(streamed, *decoded);
}

TEST(Generator, LongPromptsArePrefilledInChunks) {
  CountingModel model(1000, 64, 4);
  Generator generator(model, fixture_tokenizer());
  std::vector<int32_t> prompt(10, 500);
  ASSERT_TRUE(generator.generate(prompt, greedy(1)).ok());
  ASSERT_EQ(model.calls.size(), 3u);
  EXPECT_EQ(model.calls[0].position, 0);
  EXPECT_EQ(model.calls[1].position, 4);
  EXPECT_EQ(model.calls[2].position, 8);
  EXPECT_EQ(model.calls[2].count, 2);
}

TEST(Generator, StopsOnEosWithoutShowingIt) {
  CountingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  GenerateOptions options = greedy(50);
  options.eos_ids = {303};
  auto result = generator.generate(std::vector<int32_t>{301}, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->ids, (std::vector<int32_t>{302, 303}));
  EXPECT_EQ(result->stats.stop_reason, StopReason::kEos);
}

TEST(Generator, PromptLongerThanTheContextIsAnErrorAndChangesNothing) {
  CountingModel model(1000, 8, 16);
  Generator generator(model, fixture_tokenizer());
  std::vector<int32_t> prompt(9, 100);
  auto result = generator.generate(prompt, greedy(1));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("context"), std::string::npos);
  EXPECT_TRUE(model.calls.empty());
  EXPECT_EQ(generator.position(), 0);
  // Still usable.
  EXPECT_TRUE(generator.generate(std::vector<int32_t>{100}, greedy(2)).ok());
}

TEST(Generator, EmptyPromptIsAnError) {
  CountingModel model(1000, 8, 16);
  Generator generator(model, fixture_tokenizer());
  EXPECT_FALSE(generator.generate(std::vector<int32_t>{}, greedy(1)).ok());
}

TEST(Generator, ASecondTurnContinuesTheCacheAndFeedsTheLastToken) {
  CountingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  ASSERT_TRUE(generator.generate(std::vector<int32_t>{10, 11}, greedy(3)).ok());
  // Prompt 2 tokens + 2 decoded = 4 positions used; the third token is pending.
  EXPECT_EQ(generator.position(), 4);
  model.calls.clear();
  auto second = generator.generate(std::vector<int32_t>{20}, greedy(1));
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(model.calls.size(), 1u);
  EXPECT_EQ(model.calls[0].position, 4);
  EXPECT_EQ(model.calls[0].count, 2);  // the pending token, then the new prompt
  EXPECT_TRUE(generator.reset().ok());
  EXPECT_EQ(generator.position(), 0);
  EXPECT_EQ(model.resets, 1);
}

TEST(Generator, CallbackReturningFalseStops) {
  CountingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  int pieces = 0;
  auto result = generator.generate(std::vector<int32_t>{300}, greedy(20),
                                   [&](std::string_view, int32_t) { return ++pieces < 3; });
  ASSERT_TRUE(result.ok());
  EXPECT_LE(result->ids.size(), 5u);
  EXPECT_LT(result->ids.size(), 20u);
}

// The queued loop must be indistinguishable from the host loop: the same ids and text,
// and after the next turn the same tokens at the same cache positions.
TEST(Generator, QueuedGreedyEqualsTheHostLoop) {
  struct Case {
    const char* name;
    GenerateOptions options;
    bool stop_after_two = false;
  };
  std::vector<Case> cases;
  cases.push_back({"max tokens", greedy(6)});
  cases.push_back({"one token", greedy(1)});
  GenerateOptions eos = greedy(50);
  eos.eos_ids = {305};
  cases.push_back({"eos", eos});
  GenerateOptions stop = greedy(50);
  stop.stop_strings = {"\x06"};
  cases.push_back({"stop string", stop});
  cases.push_back({"callback", greedy(50), true});
  for (const Case& c : cases)
    for (int32_t run : {1, 3, 8}) {
      SCOPED_TRACE(std::string(c.name) + ", runs of " + std::to_string(run));
      QueuingModel queued(1000, 256, 4), host(1000, 256, 4);
      host.queueing = false;
      queued.steps_per_run = run;
      Generator a(queued, fixture_tokenizer());
      Generator b(host, fixture_tokenizer());
      const std::vector<int32_t> prompt = {300, 1, 2, 3, 4, 300};  // two chunks of 4
      for (int turn = 0; turn < 2; ++turn) {
        int pieces_a = 0, pieces_b = 0;
        auto ra = a.generate(prompt, c.options, [&](std::string_view, int32_t) {
          return !c.stop_after_two || ++pieces_a < 2;
        });
        auto rb = b.generate(prompt, c.options, [&](std::string_view, int32_t) {
          return !c.stop_after_two || ++pieces_b < 2;
        });
        ASSERT_TRUE(ra.ok()) << ra.status().to_string();
        ASSERT_TRUE(rb.ok()) << rb.status().to_string();
        EXPECT_EQ(ra->ids, rb->ids);
        EXPECT_EQ(ra->text, rb->text);
        EXPECT_EQ(ra->stats.stop_reason, rb->stats.stop_reason);
      }
      EXPECT_FALSE(queued.depth_at_wait.empty());
      EXPECT_TRUE(host.depth_at_wait.empty());
      // The host loop still holds its last token; a final turn feeds it, after which both
      // caches must hold the same conversation.
      ASSERT_TRUE(a.generate(std::vector<int32_t>{7}, greedy(1)).ok());
      ASSERT_TRUE(b.generate(std::vector<int32_t>{7}, greedy(1)).ok());
      EXPECT_EQ(a.position(), b.position());
      // Rows past the position (steps queued after the stop) are dead: every later step
      // writes its row before anything reads it.
      std::map<int32_t, int32_t> live(queued.cache.begin(), queued.cache.lower_bound(a.position()));
      EXPECT_EQ(live, host.cache);
    }
}

TEST(Generator, QueuedGreedyKeepsTheNextStepQueuedWhileItWaits) {
  QueuingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  auto result = generator.generate(std::vector<int32_t>{300, 301}, greedy(5));
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->ids, (std::vector<int32_t>{302, 303, 304, 305, 306}));
  // Two steps in flight at every wait but the last (whose successor is never needed).
  EXPECT_EQ(model.depth_at_wait, (std::vector<size_t>{2, 2, 2, 2, 1}));
  EXPECT_EQ(generator.position(), 6);  // the fifth token is pending, not yet cached
}

// Runs of steps: one run stays queued beyond the token being taken, and no run goes
// past max_new_tokens.
TEST(Generator, QueuedGreedyQueuesRunsAhead) {
  QueuingModel model(1000, 64, 16);
  model.steps_per_run = 3;
  Generator generator(model, fixture_tokenizer());
  auto result = generator.generate(std::vector<int32_t>{300, 301}, greedy(5));
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->ids, (std::vector<int32_t>{302, 303, 304, 305, 306}));
  EXPECT_EQ(model.runs, (std::vector<int32_t>{3, 1}));  // 1 from the prompt + 3 + 1 = 5
  EXPECT_EQ(model.depth_at_wait, (std::vector<size_t>{4, 4, 3, 2, 1}));
  EXPECT_EQ(generator.position(), 6);
}

// A run never passes the context (the model refuses a write past it): the run is cut
// to fit, and the tokens are the host loop's.
TEST(Generator, QueuedGreedyRunsStopAtTheContext) {
  QueuingModel model(1000, 8, 16), host(1000, 8, 16);
  model.steps_per_run = 8;
  host.queueing = false;
  Generator generator(model, fixture_tokenizer()), reference(host, fixture_tokenizer());
  const std::vector<int32_t> prompt = {300, 301, 302};
  auto result = generator.generate(prompt, greedy(50));
  auto expected = reference.generate(prompt, greedy(50));
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  EXPECT_EQ(result->ids, expected->ids);
  EXPECT_EQ(result->ids.size(), 5u);                 // the context's last row is the 5th's
  EXPECT_EQ(model.runs, (std::vector<int32_t>{5}));  // steps at positions 3..7
}

TEST(Generator, QueuedGreedyDropsTheTokenPastEos) {
  QueuingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  GenerateOptions options = greedy(50);
  options.eos_ids = {303};
  auto result = generator.generate(std::vector<int32_t>{301}, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->ids, (std::vector<int32_t>{302, 303}));
  // The step queued for 303 ran: 303 is in the cache at position 2, its own choice
  // (304) is nowhere, and the next turn starts after it.
  EXPECT_EQ(model.cache.at(2), 303);
  EXPECT_EQ(generator.position(), 3);
  auto next = generator.generate(std::vector<int32_t>{500}, greedy(1));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(model.cache.at(3), 500);
  EXPECT_EQ(next->ids, (std::vector<int32_t>{501}));
}

TEST(Generator, SamplingOrPenaltiesUseTheHostLoop) {
  QueuingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  GenerateOptions options = greedy(3);
  options.sampling.repetition_penalty = 1.3f;
  ASSERT_TRUE(generator.generate(std::vector<int32_t>{300}, options).ok());
  EXPECT_TRUE(model.depth_at_wait.empty());
}

// generate_sequence: the whole conversation each time, only its new part prefilled.
TEST(Generator, SequenceExtendingTheCachePrefillsOnlyTheNewTokens) {
  CountingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  auto first = generator.generate_sequence(std::vector<int32_t>{10, 11}, greedy(3));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->stats.cached_tokens, 0);
  EXPECT_EQ(generator.tokens(), (std::vector<int32_t>{10, 11, 12, 13, 14}));
  model.calls.clear();
  auto second =
      generator.generate_sequence(std::vector<int32_t>{10, 11, 12, 13, 14, 20, 21}, greedy(1));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->stats.cached_tokens, 4);  // 14 was pending: fed with the new turn
  ASSERT_EQ(model.calls.size(), 1u);
  EXPECT_EQ(model.calls[0].position, 4);
  EXPECT_EQ(model.calls[0].count, 3);
  EXPECT_EQ(second->ids, (std::vector<int32_t>{22}));
}

TEST(Generator, SequenceThatPartsFromTheCacheRewindsToTheCommonPrefix) {
  CountingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  ASSERT_TRUE(generator.generate_sequence(std::vector<int32_t>{10, 11}, greedy(3)).ok());
  model.calls.clear();
  auto other = generator.generate_sequence(std::vector<int32_t>{10, 11, 12, 99, 98}, greedy(2));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->stats.cached_tokens, 3);
  ASSERT_FALSE(model.calls.empty());
  EXPECT_EQ(model.calls[0].position, 3);
  EXPECT_EQ(model.calls[0].count, 2);
  EXPECT_EQ(generator.tokens(), (std::vector<int32_t>{10, 11, 12, 99, 98, 99, 100}));
}

TEST(Generator, RepeatedSequenceFeedsItsLastTokenAgain) {
  CountingModel model(1000, 64, 16);
  Generator generator(model, fixture_tokenizer());
  ASSERT_TRUE(generator.generate_sequence(std::vector<int32_t>{10, 11, 12}, greedy(1)).ok());
  model.calls.clear();
  auto again = generator.generate_sequence(std::vector<int32_t>{10, 11, 12}, greedy(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stats.cached_tokens, 2);
  ASSERT_EQ(model.calls.size(), 1u);
  EXPECT_EQ(model.calls[0].position, 2);
  EXPECT_EQ(again->ids, (std::vector<int32_t>{13}));
}

TEST(Generator, SequenceLongerThanTheContextIsRefused) {
  CountingModel model(1000, 4, 16);
  Generator generator(model, fixture_tokenizer());
  auto result = generator.generate_sequence(std::vector<int32_t>{1, 2, 3, 4, 5}, greedy(1));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(model.calls.empty());
  EXPECT_FALSE(generator.rewind(1).ok());  // nothing to keep
}

// Whatever path generation takes (queued or host loop, stopped by EOS or by length),
// the cache rows below the position are the first tokens() of the sequence.
TEST(Generator, CacheRowsMatchTheRecordedSequenceAfterReuse) {
  for (bool queueing : {true, false}) {
    QueuingModel model(1000, 64, 16);
    model.queueing = queueing;
    Generator generator(model, fixture_tokenizer());
    GenerateOptions stop_at_eos = greedy(50);
    stop_at_eos.eos_ids = {303};
    ASSERT_TRUE(generator.generate_sequence(std::vector<int32_t>{300, 301}, stop_at_eos).ok());
    std::vector<int32_t> next = generator.tokens();
    next.push_back(7);
    ASSERT_TRUE(generator.generate_sequence(next, greedy(2)).ok());
    next = {300, 301, 302, 5};
    auto parted = generator.generate_sequence(next, greedy(3));
    ASSERT_TRUE(parted.ok());
    EXPECT_EQ(parted->stats.cached_tokens, 3) << "queueing " << queueing;
    for (int32_t p = 0; p < generator.position(); ++p) {
      EXPECT_EQ(model.cache.at(p), generator.tokens()[static_cast<size_t>(p)])
          << "position " << p << ", queueing " << queueing;
    }
    EXPECT_LE(generator.tokens().size(), static_cast<size_t>(generator.position()) + 1);
  }
}

}  // namespace
}  // namespace kvrt
