#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kvrt/frontend/checkpoint.h"
#include "kvrt/frontend/llama_weights.h"
#include "test_util.h"

namespace kvrt::frontend {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::write_file;

// Writes config.json (+ generation_config.json when given) and random weights.
void write_checkpoint(const TempDir& dir, const json& config, int shards,
                      const json& generation = nullptr) {
  write_file(dir.file("config.json"), config.dump(2));
  if (!generation.is_null()) write_file(dir.file("generation_config.json"), generation.dump());
  auto parsed = parse_model_config(config, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  ASSERT_TRUE(testing::write_random_weights(dir.path(), expected_llama_tensors(*parsed),
                                            DType::kF16, shards)
                  .ok());
}

TEST(Checkpoint, OpensASingleFileCheckpointAndBuildsBothMethods) {
  TempDir dir;
  write_checkpoint(dir, testing::tiny_llama_config_json(), 1,
                   {{"bos_token_id", 1}, {"eos_token_id", {2, 3}}, {"max_length", 64}});
  auto checkpoint = Checkpoint::open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  EXPECT_EQ(checkpoint->config().hidden_size, 64);
  EXPECT_EQ(checkpoint->generation().eos_token_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(checkpoint->generation().max_length, 64);
  EXPECT_EQ(checkpoint->weights().size(), 1u + 2u * 9u + 2u);
  for (MethodKind method : {MethodKind::kPrefill, MethodKind::kDecode}) {
    auto graph = checkpoint->build_graph({method, 128, 0});
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    EXPECT_EQ(graph->nodes.size(), 1u + 17u * 2u + 4u);
  }
  // The exporter's walk: every tensor with its bytes.
  size_t total = 0;
  for (const WeightEntry& entry : checkpoint->weights().entries()) {
    auto bytes = checkpoint->weights().bytes(entry);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes->size(), entry.record.nbytes);
    EXPECT_EQ(entry.record.dtype, DType::kF16);
    total += bytes->size();
  }
  EXPECT_GT(total, 0u);
}

TEST(Checkpoint, OpensAShardedCheckpoint) {
  TempDir dir;
  write_checkpoint(dir, testing::tiny_llama_config_json(), 3);
  auto checkpoint = Checkpoint::open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  EXPECT_EQ(checkpoint->weights().files().size(), 3u);
  EXPECT_TRUE(checkpoint->build_graph({MethodKind::kDecode, 64, 0}).ok());
}

TEST(Checkpoint, TokenIdsFallBackToConfigWithoutGenerationConfig) {
  TempDir dir;
  write_checkpoint(dir, testing::tiny_llama_config_json(), 1);
  auto checkpoint = Checkpoint::open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(checkpoint->generation().bos_token_id, 1);
  EXPECT_EQ(checkpoint->generation().eos_token_ids, (std::vector<int64_t>{2}));
}

TEST(Checkpoint, MissingConfigIsNotFound) {
  TempDir dir;
  auto checkpoint = Checkpoint::open(dir.path());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("config.json"));
  EXPECT_EQ(Checkpoint::open(dir.file("nope")).status().code(), ErrorCode::kNotFound);
}

TEST(Checkpoint, MissingWeightsAreNotFound) {
  TempDir dir;
  write_file(dir.file("config.json"), testing::tiny_llama_config_json().dump());
  auto checkpoint = Checkpoint::open(dir.path());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("model.safetensors"));
}

TEST(Checkpoint, BadGenerationConfigIsRejectedNamingTheFile) {
  TempDir dir;
  write_checkpoint(dir, testing::tiny_llama_config_json(), 1, {{"eos_token_id", "two"}});
  auto checkpoint = Checkpoint::open(dir.path());
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("generation_config.json"));
}

TEST(Checkpoint, GenerationConfigTokenIdsBeyondTheVocabularyAreRefused) {
  for (const json& generation : {json{{"eos_token_id", {2, 256}}}, json{{"bos_token_id", 999}}}) {
    TempDir dir;
    write_checkpoint(dir, testing::tiny_llama_config_json(), 1, generation);
    auto checkpoint = Checkpoint::open(dir.path());
    ASSERT_FALSE(checkpoint.ok()) << generation.dump();
    EXPECT_THAT(checkpoint.status().message(), HasSubstr("generation_config.json"));
    EXPECT_THAT(checkpoint.status().message(), HasSubstr("outside the vocabulary"));
  }
}

TEST(Checkpoint, WeightsNotMatchingTheConfigFailAtBuild) {
  TempDir dir;
  write_checkpoint(dir, testing::tiny_llama_config_json(), 1);
  json bigger = testing::tiny_llama_config_json();
  bigger["intermediate_size"] = 256;
  write_file(dir.file("config.json"), bigger.dump());
  auto checkpoint = Checkpoint::open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  auto graph = checkpoint->build_graph({MethodKind::kDecode, 64, 0});
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("config implies [256, 64]"));
}

}  // namespace
}  // namespace kvrt::frontend
