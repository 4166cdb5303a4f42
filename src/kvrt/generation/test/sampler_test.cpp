// Samplers on tiny hand-computed probability tables. Logits are log-probabilities,
// so the softmax gives the table back.
#include "kvrt/generation/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace kvrt {
namespace {

std::vector<float> log_probs(std::initializer_list<double> probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<int32_t> ids_after(Sampler& sampler, const std::vector<float>& logits) {
  Candidates candidates = Candidates::from_logits(logits);
  sampler.apply(candidates);
  std::vector<int32_t> ids;
  for (const TokenCandidate& c : candidates.items) ids.push_back(c.id);
  return ids;
}

TEST(Sampler, TopPHalfOverHalfThreeTenthsFifthKeepsOne) {
  auto top_p = make_top_p(0.5f);
  EXPECT_EQ(ids_after(*top_p, log_probs({0.5, 0.3, 0.2})), (std::vector<int32_t>{0}));
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  auto top_p = make_top_p(0.8f);
  EXPECT_EQ(ids_after(*top_p, log_probs({0.2, 0.5, 0.3})), (std::vector<int32_t>{1, 2}));
  auto top_p_more = make_top_p(0.81f);
  EXPECT_EQ(ids_after(*top_p_more, log_probs({0.2, 0.5, 0.3})).size(), 3u);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  auto top_k = make_top_k(2);
  EXPECT_EQ(ids_after(*top_k, log_probs({0.1, 0.4, 0.15, 0.35})), (std::vector<int32_t>{1, 3}));
  auto off = make_top_k(0);
  EXPECT_EQ(ids_after(*off, log_probs({0.1, 0.4, 0.5})).size(), 3u);
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfTheBest) {
  // 0.3 / 0.5 = 0.6 >= 0.5 stays; 0.2 / 0.5 = 0.4 goes.
  auto min_p = make_min_p(0.5f);
  EXPECT_EQ(ids_after(*min_p, log_probs({0.2, 0.5, 0.3})), (std::vector<int32_t>{1, 2}));
}

TEST(Sampler, TemperatureDividesLogits) {
  auto temperature = make_temperature(2.0f);
  Candidates candidates = Candidates::from_logits(std::vector<float>{2.0f, -4.0f});
  temperature->apply(candidates);
  EXPECT_FLOAT_EQ(candidates.items[0].logit, 1.0f);
  EXPECT_FLOAT_EQ(candidates.items[1].logit, -2.0f);
}

// Between about 1e-45 and 1e-38, logit / T overflows a float: the sampler must still
// pick the largest logit (the limit of a vanishing temperature), for every seed.
TEST(SamplerChain, TinyTemperatureIsTheLimitOfGreedy) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.5f, -1.0f};
  for (float temperature : {1e-45f, 1e-40f, 1e-38f}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      auto chain = SamplerChain::create({.temperature = temperature, .seed = seed});
      ASSERT_TRUE(chain.ok());
      EXPECT_EQ(*chain->sample(logits), 1) << "temperature " << temperature << " seed " << seed;
    }
  }
}

TEST(Sampler, RepetitionPenaltyFollowsHuggingFace) {
  auto penalty = make_repetition_penalty(2.0f);
  penalty->accept(0);
  penalty->accept(1);
  penalty->accept(1);  // counted once
  Candidates candidates = Candidates::from_logits(std::vector<float>{2.0f, -2.0f, 1.0f});
  penalty->apply(candidates);
  EXPECT_FLOAT_EQ(candidates.items[0].logit, 1.0f);   // positive: divided
  EXPECT_FLOAT_EQ(candidates.items[1].logit, -4.0f);  // negative: multiplied
  EXPECT_FLOAT_EQ(candidates.items[2].logit, 1.0f);   // unseen: unchanged
}

TEST(Sampler, ProbabilitiesAreASoftmax) {
  Candidates candidates = Candidates::from_logits(log_probs({0.25, 0.75}));
  const auto probs = candidates.probabilities();
  EXPECT_NEAR(probs[0], 0.25, 1e-6);
  EXPECT_NEAR(probs[1], 0.75, 1e-6);
}

TEST(SamplerChain, TemperatureZeroIsArgmaxWithTiesToLowestId) {
  auto chain = SamplerChain::create({.temperature = 0.0f});
  ASSERT_TRUE(chain.ok());
  auto token = chain->sample(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f});
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, 1);
}

TEST(SamplerChain, GreedyAppliesRepetitionPenalty) {
  auto chain = SamplerChain::create({.temperature = 0.0f, .repetition_penalty = 4.0f});
  ASSERT_TRUE(chain.ok());
  const std::vector<int32_t> prompt = {1};
  chain->accept(prompt);
  // 3 / 4 < 2, so token 2 wins once token 1 is penalized.
  EXPECT_EQ(*chain->sample(std::vector<float>{0.0f, 3.0f, 2.0f}), 2);
  // Token 2 is now penalized too: 2 / 4 < 3 / 4.
  EXPECT_EQ(*chain->sample(std::vector<float>{0.0f, 3.0f, 2.0f}), 1);
}

TEST(SamplerChain, SameSeedGivesSameSequence) {
  const auto logits = log_probs({0.1, 0.2, 0.3, 0.25, 0.15});
  auto run = [&](uint64_t seed) {
    auto chain = SamplerChain::create(
        {.temperature = 0.9f, .top_k = 4, .top_p = 0.95f, .min_p = 0.05f, .seed = seed});
    EXPECT_TRUE(chain.ok());
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i) tokens.push_back(*chain->sample(logits));
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(SamplerChain, ResetRestartsTheSequence) {
  auto chain = SamplerChain::create({.seed = 7});
  ASSERT_TRUE(chain.ok());
  const auto logits = log_probs({0.4, 0.3, 0.3});
  std::vector<int32_t> first, second;
  for (int i = 0; i < 50; ++i) first.push_back(*chain->sample(logits));
  chain->reset();
  for (int i = 0; i < 50; ++i) second.push_back(*chain->sample(logits));
  EXPECT_EQ(first, second);
}

TEST(SamplerChain, DrawFollowsTheDistribution) {
  auto chain = SamplerChain::create({.seed = 1});
  ASSERT_TRUE(chain.ok());
  const auto logits = log_probs({0.5, 0.3, 0.2});
  std::map<int32_t, int> counts;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) ++counts[*chain->sample(logits)];
  EXPECT_NEAR(counts[0] / double(kDraws), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(kDraws), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(kDraws), 0.2, 0.02);
}

TEST(SamplerChain, TopPHalfAlwaysPicksTheMostLikely) {
  auto chain = SamplerChain::create({.top_p = 0.5f, .seed = 3});
  ASSERT_TRUE(chain.ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(*chain->sample(log_probs({0.3, 0.5, 0.2})), 1);
}

TEST(SamplerChain, OutOfRangeParametersAreRefused) {
  for (SamplingParams params :
       {SamplingParams{.temperature = -1.0f}, SamplingParams{.temperature = NAN},
        SamplingParams{.top_k = -1}, SamplingParams{.top_p = 0.0f}, SamplingParams{.top_p = 1.5f},
        SamplingParams{.min_p = 2.0f}, SamplingParams{.repetition_penalty = 0.0f}}) {
    auto chain = SamplerChain::create(params);
    ASSERT_FALSE(chain.ok());
    EXPECT_EQ(chain.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(SamplerChain, EmptyOrNanLogitsAreRefused) {
  auto chain = SamplerChain::create({});
  ASSERT_TRUE(chain.ok());
  EXPECT_FALSE(chain->sample(std::vector<float>{}).ok());
  EXPECT_FALSE(chain->sample(std::vector<float>{0.0f, NAN}).ok());
}

}  // namespace
}  // namespace kvrt
