#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kvrt/frontend/generation_config.h"

namespace kvrt::frontend {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(GenerationConfig, ReadsLlama31StyleFile) {
  auto config = parse_generation_config(json::parse(R"({"bos_token_id": 128000, "do_sample": true,
                      "eos_token_id": [128001, 128008, 128009], "temperature": 0.6,
                      "top_p": 0.9, "transformers_version": "4.42.3"})"),
                                        "generation_config.json");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->bos_token_id, 128000);
  EXPECT_EQ(config->eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(config->do_sample, true);
  EXPECT_DOUBLE_EQ(config->temperature.value(), 0.6);
  EXPECT_DOUBLE_EQ(config->top_p.value(), 0.9);
  EXPECT_FALSE(config->top_k.has_value());
}

TEST(GenerationConfig, SingleEosAndLengthsAreRead) {
  auto config = parse_generation_config(
      json::parse(R"({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
                      "max_length": 2048, "max_new_tokens": 64, "top_k": 40})"),
      "g.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->eos_token_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(config->pad_token_id, 0);
  EXPECT_EQ(config->max_length, 2048);
  EXPECT_EQ(config->max_new_tokens, 64);
  EXPECT_EQ(config->top_k, 40);
}

TEST(GenerationConfig, NullFieldsAreUnset) {
  auto config =
      parse_generation_config(json::parse(R"({"eos_token_id": null, "top_p": null})"), "g.json");
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->eos_token_ids.empty());
  EXPECT_FALSE(config->top_p.has_value());
}

TEST(GenerationConfig, MistypedFieldsAreRejectedNamingFileAndField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"eos_token_id": "2"})", "field 'eos_token_id'"},
      {R"({"eos_token_id": [2, -1]})", "field 'eos_token_id'"},
      {R"({"bos_token_id": -1})", "field 'bos_token_id': must not be negative"},
      {R"({"max_new_tokens": -5})", "field 'max_new_tokens': must not be negative"},
      {R"({"do_sample": 1})", "field 'do_sample': expected true or false"},
      {R"({"temperature": "hot"})", "field 'temperature': expected a number"},
  };
  for (const auto& [text, message] : cases) {
    auto config = parse_generation_config(json::parse(text), "/m/generation_config.json");
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_THAT(config.status().message(),
                AllOf(HasSubstr("/m/generation_config.json"), HasSubstr(message)));
  }
  EXPECT_FALSE(parse_generation_config(json(3), "g.json").ok());
}

}  // namespace
}  // namespace kvrt::frontend
