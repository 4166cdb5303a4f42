// Every model family end to end on the CPU engine, before HF references exist: a tiny
// random checkpoint of each (the configs of scripts/reference/make_family_fixtures.py)
// is exported through frontend -> lowering -> program file, loaded, and run. Prefilling
// a prompt in one call must give the logits of prefilling part of it and decoding the
// rest one token at a time (the cache, windows and positions agree across methods).
// Agreement with HF transformers is runtime/test/fixture_test.cpp's job (reference.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "kvrt/frontend/llama_weights.h"
#include "kvrt/frontend/model_config.h"
#include "kvrt/frontend/test/test_util.h"
#include "kvrt/runtime/module.h"
#include "kvrt/runtime/test/runtime_test_util.h"

namespace kvrt::runtime {
namespace {

using nlohmann::json;

json base_config(const char* architecture, const char* model_type) {
  return {{"architectures", {architecture}},
          {"model_type", model_type},
          {"vocab_size", 256},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 256},
          {"rms_norm_eps", 1e-6},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "float32"}};
}

struct Family {
  const char* name;
  json config;
};

std::vector<Family> families() {
  json qwen3 = base_config("Qwen3ForCausalLM", "qwen3");
  qwen3.update({{"head_dim", 32}, {"tie_word_embeddings", true}, {"rope_theta", 1e6}});
  json mistral = base_config("MistralForCausalLM", "mistral");
  mistral.update({{"sliding_window", 4}, {"tie_word_embeddings", false}});
  json phi3 = base_config("Phi3ForCausalLM", "phi3");
  phi3.update({{"partial_rotary_factor", 0.5}, {"intermediate_size", 96}, {"rms_norm_eps", 1e-5}});
  json gemma = base_config("GemmaForCausalLM", "gemma");
  gemma.update({{"head_dim", 16},
                {"num_key_value_heads", 1},
                {"hidden_act", "gelu"},
                {"hidden_activation", "gelu_pytorch_tanh"}});
  json gemma3 = base_config("Gemma3ForCausalLM", "gemma3_text");
  gemma3.update({{"head_dim", 16},
                 {"num_hidden_layers", 3},
                 {"layer_types", {"sliding_attention", "sliding_attention", "full_attention"}},
                 {"sliding_window", 4},
                 {"query_pre_attn_scalar", 24},
                 {"final_logit_softcapping", 5.0},
                 {"rope_theta", 1e6},
                 {"rope_local_base_freq", 10000.0},
                 {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}});
  return {
      {"qwen3", qwen3}, {"mistral", mistral}, {"phi3", phi3}, {"gemma", gemma}, {"gemma3", gemma3}};
}

class FamilyTest : public ::testing::TestWithParam<Family> {};

TEST_P(FamilyTest, ExportsAndPrefillAgreesWithDecodeSteps) {
  const Family& family = GetParam();
  frontend::testing::TempDir dir;
  frontend::testing::write_file(dir.file("config.json"), family.config.dump());
  Result<frontend::ModelConfig> config = frontend::parse_model_config(family.config, "config.json");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  ASSERT_TRUE(frontend::testing::write_random_weights(
                  dir.path(), frontend::expected_llama_tensors(*config), DType::kF32)
                  .ok());
  Result<std::string> path =
      testing::export_checkpoint(dir.path(), std::string("family_") + family.name + ".kvrt");
  ASSERT_TRUE(path.ok()) << path.status().to_string();
  Result<std::unique_ptr<Module>> module = Module::load(*path);
  std::remove(path->c_str());
  ASSERT_TRUE(module.ok()) << module.status().to_string();

  const std::vector<int32_t> prompt = {5, 17, 200, 3, 99, 42, 7, 130, 61, 8};
  Result<std::span<const float>> whole = (*module)->prefill(prompt, 0);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  const std::vector<float> expected(whole->begin(), whole->end());
  ASSERT_EQ(expected.size(), 256u);
  for (float v : expected) ASSERT_TRUE(std::isfinite(v));
  if (config->final_logit_softcapping) {
    for (float v : expected) EXPECT_LE(std::abs(v), *config->final_logit_softcapping);
  }

  ASSERT_TRUE((*module)->reset().ok());
  const size_t split = 3;  // past Mistral's and Gemma 3's window of 4 by the end
  Result<std::span<const float>> step =
      (*module)->prefill(std::span<const int32_t>(prompt).first(split), 0);
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  for (size_t i = split; i < prompt.size(); ++i) {
    step = (*module)->decode(prompt[i], static_cast<int32_t>(i));
    ASSERT_TRUE(step.ok()) << "position " << i << ": " << step.status().to_string();
  }
  EXPECT_LE(testing::max_abs_diff(*step, expected), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyTest, ::testing::ValuesIn(families()),
                         [](const ::testing::TestParamInfo<Family>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace kvrt::runtime
