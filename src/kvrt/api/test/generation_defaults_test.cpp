// generation_config.json as HF's generate() reads it, and which setting wins.
#include "kvrt/api/generation_defaults.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kvrt {
namespace {

using nlohmann::json;

GenerationDefaults defaults_of(const std::string& text) {
  auto config = frontend::parse_generation_config(json::parse(text), "generation_config.json");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  auto defaults = generation_defaults(*config, "generation_config.json");
  EXPECT_TRUE(defaults.ok()) << defaults.status().to_string();
  return *defaults;
}

TEST(GenerationDefaults, EveryEosIdOfAListStopsGeneration) {
  EXPECT_EQ(defaults_of(R"({"eos_token_id": [128001, 128008, 128009]})").eos_ids,
            (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(defaults_of(R"({"eos_token_id": 2})").eos_ids, (std::vector<int32_t>{2}));
}

TEST(GenerationDefaults, MissingFieldsTakeHuggingFaceDefaults) {
  const GenerationDefaults d = defaults_of(R"({"bos_token_id": 1})");
  EXPECT_FALSE(d.do_sample);
  EXPECT_FLOAT_EQ(d.temperature, 1.0f);
  EXPECT_EQ(d.top_k, 50);
  EXPECT_FLOAT_EQ(d.top_p, 1.0f);
  EXPECT_FLOAT_EQ(d.repetition_penalty, 1.0f);
}

TEST(GenerationDefaults, WithoutDoSampleGenerationIsGreedyWhateverTheTemperature) {
  // HF ignores temperature / top_p unless do_sample is true.
  const GenerationDefaults d = defaults_of(R"({"temperature": 0.6, "top_p": 0.9})");
  const SamplingParams p = resolve_sampling(d, {}, 7);
  EXPECT_EQ(p.temperature, 0.0f);
  EXPECT_EQ(p.seed, 7u);
}

TEST(GenerationDefaults, DoSampleUsesTheFileSettings) {
  // Llama 3 Instruct's generation_config.json.
  const GenerationDefaults d = defaults_of(R"({"do_sample": true, "temperature": 0.6,
                                              "top_p": 0.9, "repetition_penalty": 1.1})");
  const SamplingParams p = resolve_sampling(d, {}, 0);
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 50);  // HF's default, the file does not set it
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
}

TEST(GenerationDefaults, UserSettingsWinFieldByField) {
  const GenerationDefaults d = defaults_of(R"({"do_sample": true, "temperature": 0.6,
                                              "top_p": 0.9, "top_k": 20})");
  SamplingOverrides user;
  user.top_k = 5;
  const SamplingParams p = resolve_sampling(d, user, 0);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
}

TEST(GenerationDefaults, UserTemperatureZeroIsGreedyEvenWhenTheFileSamples) {
  SamplingOverrides user;
  user.temperature = 0.0f;
  EXPECT_EQ(resolve_sampling(defaults_of(R"({"do_sample": true})"), user, 0).temperature, 0.0f);
}

TEST(GenerationDefaults, AUserSamplingSettingSamplesEvenWhenTheFileIsGreedy) {
  SamplingOverrides user;
  user.temperature = 0.8f;
  const SamplingParams p = resolve_sampling(defaults_of(R"({"do_sample": false})"), user, 0);
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 50);
}

TEST(GenerationDefaults, ACheckpointWithoutTheFileGetsHuggingFaceDefaults) {
  const auto dir = std::filesystem::temp_directory_path() / "kvrt_generation_defaults_none";
  std::filesystem::create_directories(dir);
  auto d = read_generation_defaults(dir.string());
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->do_sample);
  EXPECT_TRUE(d->eos_ids.empty());
}

TEST(GenerationDefaults, AMalformedFileIsAnErrorNamingIt) {
  const auto dir = std::filesystem::temp_directory_path() / "kvrt_generation_defaults_bad";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "generation_config.json") << R"({"do_sample": "yes"})";
  auto d = read_generation_defaults(dir.string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("generation_config.json"), std::string::npos);
  EXPECT_NE(d.status().message().find("do_sample"), std::string::npos);
}

TEST(GenerationDefaults, TheBundledModelIsGreedyByDefault) {
  auto d = read_generation_defaults(std::string(KVRT_SOURCE_DIR) + "/models/fortune-llama");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_FALSE(d->do_sample);
  EXPECT_EQ(d->eos_ids, (std::vector<int32_t>{1}));
}

}  // namespace
}  // namespace kvrt
