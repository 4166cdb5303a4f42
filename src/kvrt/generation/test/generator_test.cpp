#include "kvrt/generation/generator.h"

#include <gtest/gtest.h>

#include <cstdlib>
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

}  // namespace
}  // namespace kvrt
