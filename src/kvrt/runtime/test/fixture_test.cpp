// G2 on the CPU engine: every fixture checkpoint of tests/fixtures, exported on the fly,
// reproduces the logits and greedy tokens that HF transformers computed
// (reference.json) within 1e-4 per logit. Fixtures are found under
// $KVRT_FIXTURES_DIR, else KVRT_SOURCE_DIR/tests/fixtures; absent ones are skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvrt/runtime/module.h"
#include "kvrt/runtime/test/runtime_test_util.h"

namespace kvrt::runtime {
namespace {

constexpr float kLogitTolerance = 1e-4f;

std::string fixtures_dir() {
  if (const char* env = std::getenv("KVRT_FIXTURES_DIR")) return env;
  return std::string(KVRT_SOURCE_DIR) + "/tests/fixtures";
}

class FixtureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureTest, LogitsAndGreedyTokensMatchTransformers_G2) {
  const std::string dir = fixtures_dir() + "/" + GetParam();
  std::ifstream file(dir + "/reference.json");
  if (!file) GTEST_SKIP() << "no reference.json in " << dir;
  const nlohmann::json reference = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(reference.is_discarded());
  const auto prompt = reference["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = reference["greedy_ids"].get<std::vector<int32_t>>();
  const auto steps = reference["step_logits"].get<std::vector<std::vector<float>>>();
  ASSERT_EQ(steps.size(), greedy.size());

  Result<std::string> path = testing::export_checkpoint(dir, std::string(GetParam()) + ".kvrt");
  ASSERT_TRUE(path.ok()) << path.status().to_string();
  Result<std::unique_ptr<Module>> module = Module::load(*path);
  std::remove(path->c_str());
  ASSERT_TRUE(module.ok()) << module.status().to_string();

  float worst = 0;
  int mismatches = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    Result<std::span<const float>> logits =
        i == 0 ? (*module)->prefill(prompt, 0)
               : (*module)->decode(greedy[i - 1], static_cast<int32_t>(prompt.size() + i - 1));
    ASSERT_TRUE(logits.ok()) << "step " << i << ": " << logits.status().to_string();
    const float diff = testing::max_abs_diff(*logits, steps[i]);
    worst = std::max(worst, diff);
    EXPECT_LE(diff, kLogitTolerance) << "step " << i;
    const auto argmax = std::max_element(logits->begin(), logits->end()) - logits->begin();
    mismatches += argmax != greedy[i];
    if (i > 0) {
      EXPECT_EQ((*module)->last_stats().total_buffer_bytes(), 0) << "step " << i;
    }
  }
  EXPECT_EQ(mismatches, 0);
  RecordProperty("max_abs_diff", std::to_string(worst));
  std::printf("[ fixture  ] %s: max |logit diff| %.3g over %zu steps, %d greedy mismatches\n",
              GetParam(), static_cast<double>(worst), steps.size(), mismatches);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest,
                         ::testing::Values("llama_gqa", "llama_untied", "qwen2_bias",
                                           "llama_sharded", "qwen3_norms", "mistral_window",
                                           "phi3_partial", "gemma_geglu", "gemma3_local"));

}  // namespace
}  // namespace kvrt::runtime
