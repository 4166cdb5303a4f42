// Opens the reference checkpoints of tests/fixtures (made by
// scripts/reference/make_fixtures.py) and builds both methods' graphs. Skips while a
// fixture is absent. KVRT_SOURCE_DIR (environment) overrides the compiled-in root.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kvrt/frontend/checkpoint.h"

namespace kvrt::frontend {
namespace {

std::string source_root() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return env != nullptr && *env != '\0' ? env : KVRT_SOURCE_DIR;
}

std::string fixture_dir(const std::string& name) {
  return source_root() + "/tests/fixtures/" + name;
}

struct FixtureExpectation {
  const char* name;
  Architecture architecture;
  bool tied;
  DType dtype;
  size_t files;
  int64_t layers;
};

class FixtureTest : public ::testing::TestWithParam<FixtureExpectation> {};

TEST_P(FixtureTest, OpensAndBuildsPrefillAndDecode) {
  const FixtureExpectation& want = GetParam();
  const std::string dir = fixture_dir(want.name);
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not generated yet";
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  const ModelConfig& config = checkpoint->config();
  EXPECT_EQ(config.architecture, want.architecture);
  EXPECT_EQ(config.tie_word_embeddings, want.tied);
  EXPECT_EQ(config.num_hidden_layers, want.layers);
  EXPECT_EQ(checkpoint->weights().files().size(), want.files);
  EXPECT_EQ(checkpoint->generation().eos_token_ids, (std::vector<int64_t>{2}));
  for (const WeightEntry& entry : checkpoint->weights().entries()) {
    EXPECT_EQ(entry.record.dtype, want.dtype) << entry.record.name;
  }
  for (MethodKind method : {MethodKind::kPrefill, MethodKind::kDecode}) {
    auto graph = checkpoint->build_graph({method, 64, 0});
    ASSERT_TRUE(graph.ok()) << method_name(method) << ": " << graph.status().to_string();
    EXPECT_TRUE(graph->validate().ok());
    EXPECT_EQ(graph->nodes.size(), static_cast<size_t>(1 + 17 * want.layers + 4));
    EXPECT_EQ(graph->mutations.size(), static_cast<size_t>(2 * want.layers));
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/reference.json"));
}

TEST(Fixture, UntiedLlamaHasLlama3RopeAndExplicitHeadDim) {
  const std::string dir = fixture_dir("llama_untied");
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not generated yet";
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  const ModelConfig& config = checkpoint->config();
  EXPECT_EQ(config.head_dim, 32);
  EXPECT_EQ(config.num_key_value_heads, 1);
  EXPECT_EQ(config.rope_scaling.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(config.rope_theta, 500000.0);
  EXPECT_EQ(config.rope_scaling.original_max_position_embeddings, 32);
}

TEST(Fixture, Qwen2HasBiasesAndItsRopeTheta) {
  const std::string dir = fixture_dir("qwen2_bias");
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not generated yet";
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  EXPECT_TRUE(checkpoint->config().qkv_bias);
  EXPECT_DOUBLE_EQ(checkpoint->config().rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(checkpoint->config().rms_norm_eps, 1e-6);
}

TEST(Fixture, BundledFortuneLlamaBuildsAtFullContext) {
  const std::string dir = source_root() + "/models/fortune-llama";
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not present";
  auto checkpoint = Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  EXPECT_TRUE(checkpoint->config().tie_word_embeddings);
  for (MethodKind method : {MethodKind::kPrefill, MethodKind::kDecode}) {
    auto graph = checkpoint->build_graph({method, 0, 0});  // default S = 512 here
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    const auto cache = graph->find_value("k_cache.0");
    ASSERT_TRUE(cache.has_value());
    EXPECT_EQ(graph->values[static_cast<size_t>(*cache)].shape[1].size, 512);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FixtureTest,
    ::testing::Values(
        FixtureExpectation{"llama_gqa", Architecture::kLlama, true, DType::kF32, 1, 2},
        FixtureExpectation{"llama_untied", Architecture::kLlama, false, DType::kBF16, 1, 3},
        FixtureExpectation{"qwen2_bias", Architecture::kQwen2, true, DType::kF16, 1, 2},
        FixtureExpectation{"llama_sharded", Architecture::kLlama, false, DType::kF32, 2, 2}),
    [](const ::testing::TestParamInfo<FixtureExpectation>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace kvrt::frontend
