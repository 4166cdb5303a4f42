#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config_samples.h"
#include "kvrt/frontend/model_config.h"
#include "test_util.h"

namespace kvrt::frontend {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace testing::samples;  // NOLINT: config fixtures

ModelConfig parse_ok(const json& config) {
  auto parsed = parse_model_config(config, "/ckpt/config.json");
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
  return parsed.ok() ? *parsed : ModelConfig();
}

// Expects refusal with `code` and a message naming the file and `field`.
void expect_refused(const json& config, ErrorCode code, const std::string& field,
                    const std::string& detail = "") {
  auto parsed = parse_model_config(config, "/ckpt/config.json");
  ASSERT_FALSE(parsed.ok()) << "expected refusal of " << field;
  EXPECT_EQ(parsed.status().code(), code) << parsed.status().to_string();
  EXPECT_THAT(
      parsed.status().message(),
      AllOf(HasSubstr("/ckpt/config.json"), HasSubstr("field '" + field + "'"), HasSubstr(detail)));
}

TEST(ModelConfig, ParsesTinyLlama) {
  const ModelConfig c = parse_ok(tinyllama_1_1b());
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 5632);
  EXPECT_EQ(c.num_hidden_layers, 22);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kDefault);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));
}

TEST(ModelConfig, Llama2WithoutRopeThetaUsesTheDefault) {
  const ModelConfig c = parse_ok(llama2_7b());
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.dtype, DType::kF16);
}

TEST(ModelConfig, ParsesLlama31Llama3RopeAndEosList) {
  const ModelConfig c = parse_ok(llama31_8b());
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
}

TEST(ModelConfig, ParsesLlama32WithExplicitHeadDimAndTiedEmbeddings) {
  const ModelConfig c = parse_ok(llama32_1b());
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  const json scaling = c.rope_scaling.to_json();
  EXPECT_EQ(scaling["type"], "llama3");
  EXPECT_EQ(scaling["original_max_position_embeddings"], 8192);
}

TEST(ModelConfig, ParsesQwen2WithFixedBiases) {
  const ModelConfig c = parse_ok(qwen2_0_5b());
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ModelConfig, AcceptsTransformers5RopeParametersSpelling) {
  const ModelConfig c = parse_ok(llama3_transformers5());
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.dtype, DType::kF32);
  json qwen = qwen2_0_5b();
  qwen.erase("rope_theta");
  qwen["rope_parameters"] = {{"rope_theta", 1e6}, {"rope_type", "default"}};
  qwen["layer_types"] = json::array({"full_attention", "full_attention"});
  qwen["sliding_window"] = nullptr;
  EXPECT_DOUBLE_EQ(parse_ok(qwen).rope_theta, 1e6);
}

TEST(ModelConfig, AcceptsOldTypeSpellingAndDefaultScalingObject) {
  json config = llama31_8b();
  config["rope_scaling"].erase("rope_type");
  config["rope_scaling"]["type"] = "llama3";
  EXPECT_EQ(parse_ok(config).rope_scaling.type, RopeType::kLlama3);
  config["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse_ok(config).rope_scaling.type, RopeType::kDefault);
}

TEST(ModelConfig, ModelTypeAloneIsEnough) {
  json config = qwen2_0_5b();
  config.erase("architectures");
  EXPECT_EQ(parse_ok(config).architecture, Architecture::kQwen2);
}

TEST(ModelConfig, MissingOptionalFieldsTakeTransformersDefaults) {
  json config = {{"model_type", "llama"},         {"hidden_size", 64},
                 {"intermediate_size", 128},      {"num_hidden_layers", 2},
                 {"num_attention_heads", 4},      {"vocab_size", 100},
                 {"num_key_value_heads", nullptr}};
  const ModelConfig c = parse_ok(config);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.dtype.has_value());
  config["model_type"] = "qwen2";
  EXPECT_EQ(parse_ok(config).max_position_embeddings, 32768);
}

TEST(ModelConfig, LlamaAttentionAndMlpBiasesAreSupported) {
  json config = tinyllama_1_1b();
  config["attention_bias"] = true;
  config["mlp_bias"] = true;
  const ModelConfig c = parse_ok(config);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
}

TEST(ModelConfig, IntegralFloatsAreAcceptedForIntegerFields) {
  json config = tinyllama_1_1b();
  config["max_position_embeddings"] = 4096.0;
  EXPECT_EQ(parse_ok(config).max_position_embeddings, 4096);
}

TEST(ModelConfig, OtherArchitecturesAreRefused) {
  json config = tinyllama_1_1b();
  config["architectures"] = {"Gemma2ForCausalLM"};
  expect_refused(config, ErrorCode::kNotSupported, "architectures", "Gemma2ForCausalLM");
  config = tinyllama_1_1b();
  config["architectures"] = {"LlamaForSequenceClassification"};
  expect_refused(config, ErrorCode::kNotSupported, "architectures");
  config = tinyllama_1_1b();
  config["model_type"] = "gemma2";
  expect_refused(config, ErrorCode::kNotSupported, "model_type", "'gemma2'");
  config = tinyllama_1_1b();
  config["model_type"] = "qwen2";
  expect_refused(config, ErrorCode::kInvalidArgument, "model_type", "disagrees");
  config = tinyllama_1_1b();
  config.erase("architectures");
  config.erase("model_type");
  expect_refused(config, ErrorCode::kInvalidArgument, "model_type", "missing");
}

TEST(ModelConfig, HiddenActOtherThanSiluIsRefused) {
  json config = tinyllama_1_1b();
  config["hidden_act"] = "gelu";
  expect_refused(config, ErrorCode::kNotSupported, "hidden_act", "'gelu'");
}

TEST(ModelConfig, UnimplementedRopeTypesAreRefused) {
  for (const char* type : {"dynamic", "yarn", "longrope", "su"}) {
    json config = tinyllama_1_1b();
    config["rope_scaling"] = {{"rope_type", type}, {"factor", 2.0}};
    expect_refused(config, ErrorCode::kNotSupported, "rope_scaling.rope_type",
                   std::string("'") + type + "'");
  }
  json config = tinyllama_1_1b();
  config["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  expect_refused(config, ErrorCode::kNotSupported, "rope_scaling.type", "'dynamic'");
  config = llama3_transformers5();
  config["rope_parameters"]["rope_type"] = "yarn";
  expect_refused(config, ErrorCode::kNotSupported, "rope_parameters.rope_type", "'yarn'");
}

TEST(ModelConfig, MalformedRopeSettingsAreRefused) {
  json config = llama31_8b();
  config["rope_scaling"].erase("factor");
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_scaling.factor", "missing");
  config = llama31_8b();
  config["rope_scaling"]["low_freq_factor"] = 4.0;
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_scaling.high_freq_factor");
  config = llama31_8b();
  config["rope_scaling"]["attention_factor"] = 2.0;
  expect_refused(config, ErrorCode::kNotSupported, "rope_scaling.attention_factor");
  config = llama31_8b();
  config["rope_scaling"]["type"] = "default";
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_scaling.type", "disagrees");
  config = llama31_8b();
  config["rope_scaling"].erase("rope_type");
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_scaling.rope_type", "missing");
  config = llama31_8b();
  config["rope_scaling"] = "llama3";
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_scaling", "expected an object");
  config = tinyllama_1_1b();
  config["rope_theta"] = -1.0;
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_theta", "positive");
}

TEST(ModelConfig, DisagreeingRopeSpellingsAreRefused) {
  json config = llama3_transformers5();
  config["rope_theta"] = 10000.0;
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_parameters", "rope_theta disagrees");
  config = llama3_transformers5();
  config["rope_scaling"] = {{"rope_type", "default"}};
  expect_refused(config, ErrorCode::kInvalidArgument, "rope_scaling", "disagrees");
  config = llama3_transformers5();
  config["rope_scaling"] = config["rope_parameters"];
  config["rope_scaling"].erase("rope_theta");
  EXPECT_EQ(parse_ok(config).rope_scaling.type, RopeType::kLlama3);  // agreeing is fine
}

TEST(ModelConfig, PartialRotaryFactorIsRefused) {
  json config = tinyllama_1_1b();
  config["partial_rotary_factor"] = 0.5;
  expect_refused(config, ErrorCode::kNotSupported, "partial_rotary_factor");
  config = llama3_transformers5();
  config["rope_parameters"]["partial_rotary_factor"] = 0.25;
  expect_refused(config, ErrorCode::kNotSupported, "rope_parameters.partial_rotary_factor");
  config = tinyllama_1_1b();
  config["partial_rotary_factor"] = 1.0;
  parse_ok(config);
}

TEST(ModelConfig, Qwen2SlidingWindowIsRefused) {
  json config = qwen2_0_5b();
  config["use_sliding_window"] = true;
  expect_refused(config, ErrorCode::kNotSupported, "use_sliding_window");
  config = qwen2_0_5b();
  config["layer_types"] = json::array({"full_attention", "sliding_attention"});
  expect_refused(config, ErrorCode::kNotSupported, "layer_types", "sliding_attention");
  config = tinyllama_1_1b();
  config["sliding_window"] = 4096;
  expect_refused(config, ErrorCode::kNotSupported, "sliding_window");
}

TEST(ModelConfig, PretrainingTpAboveOneIsRefused) {
  json config = llama2_7b();
  config["pretraining_tp"] = 2;
  expect_refused(config, ErrorCode::kNotSupported, "pretraining_tp");
}

TEST(ModelConfig, QuantizedAndOtherUnimplementedFeaturesAreRefused) {
  json config = tinyllama_1_1b();
  config["quantization_config"] = {{"quant_method", "gptq"}};
  expect_refused(config, ErrorCode::kNotSupported, "quantization_config");
  config = tinyllama_1_1b();
  config["final_logit_softcapping"] = 30.0;
  expect_refused(config, ErrorCode::kNotSupported, "final_logit_softcapping");
  config = tinyllama_1_1b();
  config["final_logit_softcapping"] = nullptr;  // null means unset
  parse_ok(config);
}

TEST(ModelConfig, InconsistentShapesAreRefused) {
  json config = tinyllama_1_1b();
  config["num_key_value_heads"] = 5;
  expect_refused(config, ErrorCode::kInvalidArgument, "num_key_value_heads", "does not divide");
  config = tinyllama_1_1b();
  config["num_attention_heads"] = 30;
  config["num_key_value_heads"] = 30;
  expect_refused(config, ErrorCode::kInvalidArgument, "num_attention_heads",
                 "does not divide hidden_size");
  config = tinyllama_1_1b();
  config["head_dim"] = 63;
  expect_refused(config, ErrorCode::kInvalidArgument, "head_dim", "even");
}

TEST(ModelConfig, MissingOrMistypedRequiredFieldsAreRefused) {
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "vocab_size"}) {
    json config = tinyllama_1_1b();
    config.erase(field);
    expect_refused(config, ErrorCode::kInvalidArgument, field, "missing");
  }
  json config = tinyllama_1_1b();
  config["hidden_size"] = "2048";
  expect_refused(config, ErrorCode::kInvalidArgument, "hidden_size", "expected an integer");
  config["hidden_size"] = 0;
  expect_refused(config, ErrorCode::kInvalidArgument, "hidden_size", "must be positive");
  config["hidden_size"] = 20.5;
  expect_refused(config, ErrorCode::kInvalidArgument, "hidden_size", "expected an integer");
  config["hidden_size"] = 1ll << 40;
  expect_refused(config, ErrorCode::kInvalidArgument, "hidden_size", "implausibly large");
  config = tinyllama_1_1b();
  config["tie_word_embeddings"] = "yes";
  expect_refused(config, ErrorCode::kInvalidArgument, "tie_word_embeddings", "true or false");
  config = tinyllama_1_1b();
  config["eos_token_id"] = json::array({2, "x"});
  expect_refused(config, ErrorCode::kInvalidArgument, "eos_token_id");
  config = tinyllama_1_1b();
  config["torch_dtype"] = "float64";
  expect_refused(config, ErrorCode::kNotSupported, "torch_dtype", "'float64'");
}

TEST(ModelConfig, NonObjectRootIsRefused) {
  auto parsed = parse_model_config(json::array(), "/ckpt/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("/ckpt/config.json"));
}

TEST(ModelConfig, LoadNamesTheFileOnBadJson) {
  testing::TempDir dir;
  testing::write_file(dir.file("config.json"), "{\"hidden_size\": ");
  auto parsed = load_model_config(dir.file("config.json"));
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr(dir.file("config.json")));
  EXPECT_EQ(load_model_config(dir.file("missing.json")).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kvrt::frontend

namespace kvrt::frontend {
namespace {

// The engines compute in f32: a value a float cannot hold is refused, naming the field,
// instead of becoming inf or 0 in the graph.
TEST(ModelConfig, NumbersThatDoNotFitAFloatAreRefused) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, double>>{
           {"rms_norm_eps", 1e308}, {"rms_norm_eps", 1e-50}, {"rope_theta", 1e300}}) {
    json config = testing::samples::tinyllama_1_1b();
    config[field] = value;
    expect_refused(config, ErrorCode::kInvalidArgument, field, "does not fit a float");
  }
}

// A special token outside the vocabulary: EOS would never stop generation, BOS would
// index past the embedding table.
TEST(ModelConfig, SpecialTokenIdsBeyondTheVocabularyAreRefused) {
  json config = testing::samples::tinyllama_1_1b();
  config["eos_token_id"] = 32000;
  expect_refused(config, ErrorCode::kInvalidArgument, "eos_token_id", "outside the vocabulary");
  config = testing::samples::tinyllama_1_1b();
  config["eos_token_id"] = json::array({2, 1u << 31});
  expect_refused(config, ErrorCode::kInvalidArgument, "eos_token_id", "outside the vocabulary");
  config = testing::samples::tinyllama_1_1b();
  config["bos_token_id"] = 40000;
  expect_refused(config, ErrorCode::kInvalidArgument, "bos_token_id", "outside the vocabulary");
}

}  // namespace
}  // namespace kvrt::frontend
