// Qwen3, Mistral, Phi-3, Gemma and Gemma 3: the config fields each family reads (with
// transformers' defaults), the refusals naming the field kvrt does not implement, the
// tensors each config implies, and the graph the frontend builds from them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "family_samples.h"
#include "kvrt/frontend/llama_graph.h"
#include "kvrt/frontend/llama_weights.h"

namespace kvrt::frontend {
namespace {

using graph::Graph;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace testing::samples;  // NOLINT: config fixtures

ModelConfig parse_ok(const json& text) {
  auto config = parse_model_config(text, "/ckpt/config.json");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : ModelConfig();
}

void expect_refused(const json& text, ErrorCode code, const std::string& field,
                    const std::string& detail = "") {
  auto config = parse_model_config(text, "/ckpt/config.json");
  ASSERT_FALSE(config.ok()) << field;
  EXPECT_EQ(config.status().code(), code) << config.status().to_string();
  EXPECT_THAT(config.status().message(),
              AllOf(HasSubstr("field '" + field + "'"), HasSubstr(detail)));
}

WeightIndex index_for(const ModelConfig& config) {
  std::vector<TensorRecord> records;
  for (const ExpectedTensor& t : expected_llama_tensors(config)) {
    records.push_back({t.name, DType::kBF16, t.shape, 0, 0});
  }
  return std::move(WeightIndex::shape_only(records)).value();
}

Graph build_ok(const ModelConfig& config, int64_t max_seq = 256) {
  auto graph = build_llama_graph(config, index_for(config), {MethodKind::kPrefill, max_seq, 0});
  EXPECT_TRUE(graph.ok()) << graph.status().to_string();
  return graph.ok() ? std::move(graph).value() : Graph();
}

const graph::Node* find_node(const Graph& g, std::string_view name) {
  for (const graph::Node& n : g.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const json& attrs(const Graph& g, std::string_view name) {
  const graph::Node* n = find_node(g, name);
  EXPECT_NE(n, nullptr) << "no node " << name;
  static const json empty = json::object();
  return n != nullptr ? n->attributes : empty;
}

std::string input_name(const Graph& g, std::string_view node, size_t i) {
  const graph::Node* n = find_node(g, node);
  return n == nullptr ? "" : g.values[static_cast<size_t>(n->inputs.at(i))].name;
}

json small(json config, int64_t layers = 2) {
  config["num_hidden_layers"] = layers;
  return config;
}

TEST(Qwen3, NormsEachQueryAndKeyHeadBeforeRotary) {
  const ModelConfig config = parse_ok(small(qwen3_0_6b()));
  EXPECT_EQ(config.architecture, Architecture::kQwen3);
  EXPECT_EQ(config.head_dim, 128);  // independent of hidden / heads (64)
  EXPECT_FALSE(config.qkv_bias);
  EXPECT_TRUE(config.tie_word_embeddings);
  const Graph g = build_ok(config);
  EXPECT_EQ(g.nodes.size(), 1u + 19u * 2u + 4u);  // + final norm, take_last, lm_head, argmax
  const json& q_norm = attrs(g, "layers.1.attn.q_norm");
  EXPECT_EQ(q_norm.at("head_dim"), 128);
  EXPECT_FALSE(q_norm.contains("unit_offset"));
  EXPECT_EQ(input_name(g, "layers.1.attn.q_norm", 1), "model.layers.1.self_attn.q_norm.weight");
  EXPECT_EQ(input_name(g, "layers.1.attn.q_rope", 0), "layers.1.attn.q_norm");
  EXPECT_EQ(input_name(g, "layers.1.attn.k_rope", 0), "layers.1.attn.k_norm");
  EXPECT_FALSE(attrs(g, "layers.0.attn.attention").contains("window"));
}

TEST(Qwen3, SlidingWindowAndPartialRotaryAreRefused) {
  json config = qwen3_0_6b();
  config["use_sliding_window"] = true;
  expect_refused(config, ErrorCode::kNotSupported, "use_sliding_window");
  config = qwen3_0_6b();
  config["partial_rotary_factor"] = 0.5;
  expect_refused(config, ErrorCode::kNotSupported, "partial_rotary_factor");
  config = qwen3_0_6b();
  config["attention_bias"] = true;
  EXPECT_TRUE(parse_ok(config).qkv_bias && parse_ok(config).o_bias);
}

TEST(Mistral, WindowIsHonouredOnlyWhenShorterThanTheCache) {
  const ModelConfig config = parse_ok(small(mistral_7b_v01()));
  ASSERT_TRUE(config.sliding_window.has_value());
  EXPECT_EQ(*config.sliding_window, 4096);
  const Graph windowed = build_ok(config, 8192);
  EXPECT_EQ(attrs(windowed, "layers.1.attn.attention").at("window"), 4096);
  const Graph full = build_ok(config, 4096);  // never more than 4096 positions
  EXPECT_FALSE(attrs(full, "layers.1.attn.attention").contains("window"));
  EXPECT_EQ(full.nodes.size(), 1u + 17u * 2u + 4u);  // exactly a Llama graph

  json unset = mistral_7b_v01();
  unset["sliding_window"] = nullptr;  // Mistral v0.2+: full attention
  EXPECT_FALSE(parse_ok(unset).sliding_window.has_value());
  EXPECT_FALSE(
      attrs(build_ok(parse_ok(small(unset)), 8192), "layers.0.attn.attention").contains("window"));
  json typed = mistral_7b_v01();
  typed["num_hidden_layers"] = 2;
  typed["layer_types"] = json::array({"full_attention", "full_attention"});
  expect_refused(typed, ErrorCode::kNotSupported, "layer_types", "sliding_window");
}

TEST(Phi3, FusedProjectionsAreSlicedInHfOrder) {
  const ModelConfig config = parse_ok(small(phi3_mini_4k()));
  EXPECT_EQ(config.architecture, Architecture::kPhi3);
  EXPECT_EQ(config.rotary_dim, 96);
  const Graph g = build_ok(config, 4096);
  EXPECT_EQ(g.nodes.size(), 1u + 19u * 2u + 4u);  // + final norm, take_last, lm_head, argmax
  EXPECT_EQ(input_name(g, "layers.0.attn.qkv_proj", 1), "model.layers.0.self_attn.qkv_proj.weight");
  EXPECT_EQ(attrs(g, "layers.0.attn.q_slice"), (json{{"begin", 0}, {"size", 3072}}));
  EXPECT_EQ(attrs(g, "layers.0.attn.k_slice"), (json{{"begin", 3072}, {"size", 3072}}));
  EXPECT_EQ(attrs(g, "layers.0.attn.v_slice"), (json{{"begin", 6144}, {"size", 3072}}));
  EXPECT_EQ(attrs(g, "layers.0.mlp.gate_slice"), (json{{"begin", 0}, {"size", 8192}}));
  EXPECT_EQ(attrs(g, "layers.0.mlp.up_slice"), (json{{"begin", 8192}, {"size", 8192}}));
  EXPECT_EQ(input_name(g, "layers.0.mlp.silu_mul", 0), "layers.0.mlp.gate_slice");
  EXPECT_FALSE(attrs(g, "layers.0.attn.q_rope").contains("rotary_dim"));
  EXPECT_EQ(attrs(g, "layers.0.attn.attention").at("window"), 2047);
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-5);
}

TEST(Phi3, PartialRotaryRotatesPartOfEachHeadAndLongropeIsRefused) {
  json config = phi4_mini();
  expect_refused(config, ErrorCode::kNotSupported, "rope_scaling.type", "'longrope'");
  config["rope_scaling"] = nullptr;
  config["num_hidden_layers"] = 1;
  const ModelConfig parsed = parse_ok(config);
  EXPECT_EQ(parsed.head_dim, 128);
  EXPECT_EQ(parsed.rotary_dim, 96);  // int(128 * 0.75)
  const Graph g = build_ok(parsed);
  EXPECT_EQ(attrs(g, "layers.0.attn.k_rope").at("rotary_dim"), 96);
  EXPECT_FALSE(attrs(g, "layers.0.attn.attention").contains("window"));  // 262144 >= 256
  config["partial_rotary_factor"] = 0.01;                                // 1.28 -> 1: odd
  expect_refused(config, ErrorCode::kInvalidArgument, "partial_rotary_factor", "even");
  config = phi4_mini();
  config["rope_scaling"] = {{"type", "su"}, {"short_factor", {1.0}}, {"long_factor", {1.0}}};
  expect_refused(config, ErrorCode::kNotSupported, "rope_scaling.type", "'su'");
}

TEST(Phi3, SeparateProjectionsAreNotAPhi3Checkpoint) {
  const ModelConfig phi3 = parse_ok(small(phi3_mini_4k(), 1));
  std::vector<TensorRecord> records;
  for (const ExpectedTensor& t : expected_llama_tensors(phi3)) {
    if (t.name.ends_with("qkv_proj.weight")) {
      records.push_back(
          {"model.layers.0.self_attn.q_proj.weight", DType::kBF16, {3072, 3072}, 0, 0});
    } else {
      records.push_back({t.name, DType::kBF16, t.shape, 0, 0});
    }
  }
  const WeightIndex index = std::move(WeightIndex::shape_only(records)).value();
  Status status = check_llama_weights(phi3, index);
  EXPECT_EQ(status.code(), ErrorCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("model.layers.0.self_attn.qkv_proj.weight"));
}

TEST(Gemma, ScalesEmbeddingsAndUsesUnitOffsetNormsAndGeglu) {
  const ModelConfig config = parse_ok(small(gemma_2b()));
  EXPECT_EQ(config.activation, Activation::kGeluTanh);  // hidden_act "gelu" is not read
  EXPECT_TRUE(config.tie_word_embeddings);              // GemmaConfig's default
  const Graph g = build_ok(config);
  EXPECT_EQ(g.nodes.size(), 1u + 1u + 17u * 2u + 4u);  // + final norm, take_last, lm_head, argmax
  EXPECT_DOUBLE_EQ(attrs(g, "embed_scale").at("factor").get<double>(), std::sqrt(2048.0));
  for (const char* norm : {"layers.0.input_norm", "layers.1.post_attention_norm", "final_norm"}) {
    EXPECT_EQ(attrs(g, norm).at("unit_offset"), true) << norm;
  }
  EXPECT_EQ(find_node(g, "layers.0.mlp.gelu_mul")->op, "gelu_tanh_mul");
  EXPECT_EQ(input_name(g, "lm_head", 1), "model.embed_tokens.weight");
  EXPECT_DOUBLE_EQ(attrs(g, "layers.0.attn.attention").at("scale").get<double>(), 1.0 / 16);

  json other = gemma_2b();
  other["hidden_activation"] = "gelu";
  expect_refused(other, ErrorCode::kNotSupported, "hidden_activation", "'gelu'");
  other = gemma_2b();
  other.erase("hidden_activation");  // HF falls back to gelu_pytorch_tanh
  EXPECT_EQ(parse_ok(other).activation, Activation::kGeluTanh);
  other = gemma_2b();
  other["sliding_window"] = 4096;
  expect_refused(other, ErrorCode::kNotSupported, "sliding_window");
}

TEST(Gemma3, LocalLayersAlternateWithGlobalOnesByThePattern) {
  const ModelConfig config = parse_ok(small(gemma3_1b(), 7));
  EXPECT_EQ(config.architecture, Architecture::kGemma3);
  EXPECT_EQ(config.sliding_layers, (std::vector<bool>{true, true, true, true, true, false, true}));
  const Graph g = build_ok(config, 2048);
  EXPECT_EQ(g.nodes.size(), 1u + 1u + 21u * 7u + 4u);  // + final norm, take_last, lm_head, argmax
  const json& local = attrs(g, "layers.0.attn.q_rope");
  const json& global = attrs(g, "layers.5.attn.q_rope");
  EXPECT_DOUBLE_EQ(local.at("theta").get<double>(), 10000.0);
  EXPECT_DOUBLE_EQ(global.at("theta").get<double>(), 1e6);
  EXPECT_EQ(attrs(g, "layers.0.attn.attention").at("window"), 512);
  EXPECT_FALSE(attrs(g, "layers.5.attn.attention").contains("window"));
  EXPECT_DOUBLE_EQ(attrs(g, "layers.5.attn.attention").at("scale").get<double>(), 1.0 / 16);
  const json& q_norm = attrs(g, "layers.0.attn.q_norm");
  EXPECT_EQ(q_norm.at("head_dim"), 256);
  EXPECT_EQ(q_norm.at("unit_offset"), true);
  EXPECT_EQ(input_name(g, "layers.0.attn.post_norm", 1),
            "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(input_name(g, "layers.0.pre_mlp_norm", 1),
            "model.layers.0.pre_feedforward_layernorm.weight");
  EXPECT_EQ(input_name(g, "layers.0.mlp.post_norm", 0), "layers.0.mlp.down_proj");
  EXPECT_EQ(input_name(g, "layers.0.attn.residual", 1), "layers.0.attn.post_norm");
  EXPECT_EQ(find_node(g, "logit_softcap"), nullptr);
}

TEST(Gemma3, SoftcapScalarsAndTransformers5RopeParameters) {
  json config = small(gemma3_1b(), 2);
  config["final_logit_softcapping"] = 30.0;
  config["query_pre_attn_scalar"] = 144;
  config["layer_types"] = json::array({"full_attention", "sliding_attention"});
  config.erase("rope_theta");
  config.erase("rope_local_base_freq");
  config["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  const ModelConfig parsed = parse_ok(config);
  EXPECT_EQ(parsed.sliding_layers, (std::vector<bool>{false, true}));
  EXPECT_EQ(parsed.rope_scaling.type, RopeType::kLinear);
  EXPECT_DOUBLE_EQ(parsed.local_rope_theta, 10000.0);
  const Graph g = build_ok(parsed, 2048);
  EXPECT_EQ(attrs(g, "logit_softcap").at("cap"), 30.0);
  EXPECT_EQ(g.values[static_cast<size_t>(g.outputs.at(0))].name, "logits");
  EXPECT_EQ(attrs(g, "layers.0.attn.k_rope").at("scaling"),
            (json{{"type", "linear"}, {"factor", 8.0}}));
  EXPECT_EQ(attrs(g, "layers.1.attn.k_rope").at("scaling"), (json{{"type", "default"}}));
  EXPECT_DOUBLE_EQ(attrs(g, "layers.0.attn.attention").at("scale").get<double>(), 1.0 / 12);
}

TEST(Gemma3, UnimplementedFieldsAreRefusedByName) {
  json config = gemma3_1b();
  config["attn_logit_softcapping"] = 50.0;
  expect_refused(config, ErrorCode::kNotSupported, "attn_logit_softcapping");
  config = gemma3_1b();
  config["use_bidirectional_attention"] = true;
  expect_refused(config, ErrorCode::kNotSupported, "use_bidirectional_attention");
  config = gemma3_1b();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
  expect_refused(config, ErrorCode::kNotSupported, "rope_scaling.rope_type", "'yarn'");
  config = gemma3_1b();
  config["layer_types"] = json::array({"chunked_attention"});
  config["num_hidden_layers"] = 1;
  expect_refused(config, ErrorCode::kNotSupported, "layer_types", "chunked_attention");
  config = qwen3_0_6b();
  config["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
  expect_refused(config, ErrorCode::kNotSupported, "rope_parameters", "gemma3_text");
  config = gemma3_1b();
  config["architectures"] = {"Gemma3ForConditionalGeneration"};
  expect_refused(config, ErrorCode::kNotSupported, "architectures");
}

TEST(Families, ExpectedTensorsNameEachFamilysWeights) {
  auto names = [](const json& text) {
    std::vector<std::string> out;
    for (const ExpectedTensor& t : expected_llama_tensors(parse_ok(small(text, 1)))) {
      out.push_back(t.name);
    }
    return out;
  };
  EXPECT_THAT(names(qwen3_0_6b()), ::testing::Contains("model.layers.0.self_attn.k_norm.weight"));
  EXPECT_THAT(names(phi3_mini_4k()), ::testing::Contains("model.layers.0.mlp.gate_up_proj.weight"));
  EXPECT_THAT(names(phi3_mini_4k()),
              ::testing::Not(::testing::Contains("model.layers.0.self_attn.q_proj.weight")));
  EXPECT_THAT(names(gemma3_1b()),
              ::testing::Contains("model.layers.0.post_feedforward_layernorm.weight"));
  EXPECT_EQ(names(gemma_2b()).size(), 1u + 9u + 1u);  // tied: no lm_head
}

}  // namespace
}  // namespace kvrt::frontend
