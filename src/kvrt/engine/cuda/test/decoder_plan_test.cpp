// The CUDA engine's plan, on machines without a GPU: every fixture's method graphs match
// the decoder pattern with the right shapes and weights, and what the engine cannot run
// is refused at init with NotSupported naming it.
#include "kvrt/engine/cuda/decoder_plan.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kvrt/export/exporter.h"
#include "kvrt/frontend/checkpoint.h"
#include "kvrt/frontend/llama_weights.h"

namespace kvrt::engine::cuda {
namespace {

graph::Graph decode_graph(const std::string& fixture, DType cache = DType::kBF16) {
  auto checkpoint = frontend::Checkpoint::open(std::string(KVRT_SOURCE_DIR) + "/" + fixture);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  exporter::ExportOptions options;
  options.cache_dtype = cache;
  auto graphs = exporter::build_method_graphs(*checkpoint, options);
  EXPECT_TRUE(graphs.ok()) << graphs.status().to_string();
  // As a partition sees it (lowering's cut): the caches it updates are inputs too.
  graph::Graph graph = graphs->decode;
  for (const graph::BufferMutation& m : graph.mutations) graph.inputs.push_back(m.buffer);
  return graph;
}

TEST(DecoderPlan, QwenFixtureMatchesWithItsBiases) {
  Result<DecoderPlan> plan = plan_decoder(decode_graph("tests/fixtures/qwen2_bias"));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_FALSE(plan->layers.empty());
  const LayerPlan& layer = plan->layers[0];
  EXPECT_EQ(layer.q.weight, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(layer.k.bias, "model.layers.0.self_attn.k_proj.bias");
  EXPECT_EQ(layer.gate.weight, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(layer.up.weight, "model.layers.0.mlp.up_proj.weight");
  ASSERT_EQ(plan->rope_tables.size(), 1u);
  EXPECT_EQ(plan->rope_tables[0].size(), static_cast<size_t>(plan->head_dim / 2));
  EXPECT_GE(layer.k_cache_input, 0);
  EXPECT_GE(layer.v_cache_output, 0);
  EXPECT_EQ(plan->max_tokens, 1);
  EXPECT_GE(plan->next_token_output, 0);  // the graph's argmax: greedy on the device
  EXPECT_NE(plan->next_token_output, plan->logits_output);
}

TEST(DecoderPlan, AGraphWithoutArgmaxStillMatches) {
  graph::Graph graph = decode_graph("tests/fixtures/llama_gqa");
  graph.nodes.pop_back();  // next_token = argmax(logits) is the last node
  graph.outputs.erase(graph.outputs.begin() + 1);
  Result<DecoderPlan> plan = plan_decoder(graph);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->next_token_output, -1);
}

TEST(DecoderPlan, TiedHeadReadsTheEmbeddingTable) {
  Result<DecoderPlan> plan = plan_decoder(decode_graph("tests/fixtures/llama_gqa"));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->lm_head, plan->embedding);
  Result<DecoderPlan> untied = plan_decoder(decode_graph("tests/fixtures/llama_untied"));
  ASSERT_TRUE(untied.ok()) << untied.status().to_string();
  EXPECT_EQ(untied->lm_head, "lm_head.weight");
}

TEST(DecoderPlan, F32CacheIsNotSupportedNamingTheCache) {
  Result<DecoderPlan> plan = plan_decoder(decode_graph("tests/fixtures/llama_gqa", DType::kF32));
  ASSERT_EQ(plan.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(plan.status().message().find("cache 'k_cache.0'"), std::string::npos)
      << plan.status().to_string();
}

TEST(DecoderPlan, NodeOutsideThePatternIsNotSupportedNamingIt) {
  graph::Graph graph = decode_graph("tests/fixtures/llama_gqa");
  for (graph::Node& node : graph.nodes) {
    if (node.name == "layers.0.mlp.silu_mul") node.op = "add";  // not a SwiGLU any more
  }
  Result<DecoderPlan> plan = plan_decoder(graph);
  ASSERT_EQ(plan.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(plan.status().message().find("layers.0"), std::string::npos)
      << plan.status().to_string();
}

// A family's decode graph from its config, with shape-only weights (the plan reads no
// weight bytes), as a partition sees it.
graph::Graph family_graph(nlohmann::json config, int64_t max_seq = 64) {
  config.update({{"vocab_size", 256},
                 {"hidden_size", 64},
                 {"intermediate_size", 128},
                 {"num_hidden_layers", 2},
                 {"num_attention_heads", 4},
                 {"num_key_value_heads", 2},
                 {"max_position_embeddings", 256}});
  auto parsed = frontend::parse_model_config(config, "config.json");
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
  std::vector<frontend::TensorRecord> records;
  for (const frontend::ExpectedTensor& t : frontend::expected_llama_tensors(*parsed)) {
    records.push_back({t.name, DType::kBF16, t.shape, 0, 0});
  }
  auto index = frontend::WeightIndex::shape_only(records);
  EXPECT_TRUE(index.ok());
  auto built = frontend::build_llama_graph(
      *parsed, *index, {frontend::MethodKind::kDecode, max_seq, 0, DType::kBF16});
  EXPECT_TRUE(built.ok()) << built.status().to_string();
  graph::Graph graph = std::move(built).value();
  for (const graph::BufferMutation& m : graph.mutations) graph.inputs.push_back(m.buffer);
  return graph;
}

void expect_refused_naming(const graph::Graph& graph, const std::string& node) {
  Result<DecoderPlan> plan = plan_decoder(graph);
  ASSERT_EQ(plan.status().code(), ErrorCode::kNotSupported) << plan.status().to_string();
  EXPECT_NE(plan.status().message().find("node '" + node + "'"), std::string::npos)
      << plan.status().to_string();
}

graph::Graph prefill_graph(const std::string& fixture) {
  auto checkpoint = frontend::Checkpoint::open(std::string(KVRT_SOURCE_DIR) + "/" + fixture);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status().to_string();
  exporter::ExportOptions options;
  options.cache_dtype = DType::kBF16;
  auto graphs = exporter::build_method_graphs(*checkpoint, options);
  EXPECT_TRUE(graphs.ok()) << graphs.status().to_string();
  graph::Graph graph = graphs->prefill;
  for (const graph::BufferMutation& m : graph.mutations) graph.inputs.push_back(m.buffer);
  return graph;
}

TEST(DecoderPlan, EveryFamilyFixtureMatchesForDecodeAndPrefill) {
  for (const char* fixture :
       {"gemma3_local", "gemma_geglu", "mistral_window", "phi3_partial", "qwen3_norms"}) {
    const std::string path = std::string("tests/fixtures/") + fixture;
    for (const graph::Graph& graph : {decode_graph(path), prefill_graph(path)}) {
      Result<DecoderPlan> plan = plan_decoder(graph);
      ASSERT_TRUE(plan.ok()) << fixture << ": " << plan.status().to_string();
      EXPECT_GE(plan->next_token_output, 0) << fixture;
    }
  }
}

TEST(DecoderPlan, Qwen3HasLlamaStyleHeadNorms) {
  Result<DecoderPlan> plan =
      plan_decoder(family_graph({{"model_type", "qwen3"}, {"head_dim", 32}}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->head_dim, 32);  // independent of hidden / heads
  const LayerPlan& layer = plan->layers[1];
  EXPECT_EQ(layer.q_norm.weight, "model.layers.1.self_attn.q_norm.weight");
  EXPECT_EQ(layer.k_norm.weight, "model.layers.1.self_attn.k_norm.weight");
  EXPECT_FALSE(layer.q_norm.unit_offset);
  EXPECT_FALSE(layer.plain());
  EXPECT_EQ(plan->activation, Activation::kSilu);
  EXPECT_EQ(plan->rope_tables.size(), 1u);
}

TEST(DecoderPlan, Phi3KeepsItsFusedProjectionsAndPartialRotary) {
  Result<DecoderPlan> plan =
      plan_decoder(family_graph({{"model_type", "phi3"}, {"partial_rotary_factor", 0.5}}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const LayerPlan& layer = plan->layers[0];
  EXPECT_TRUE(layer.qkv_fused);
  EXPECT_TRUE(layer.gate_up_fused);
  EXPECT_EQ(layer.q.weight, "model.layers.0.self_attn.qkv_proj.weight");
  EXPECT_TRUE(layer.k.weight.empty());
  EXPECT_EQ(layer.gate.weight, "model.layers.0.mlp.gate_up_proj.weight");
  EXPECT_EQ(plan->intermediate, 128);
  EXPECT_EQ(plan->head_dim, 16);
  EXPECT_EQ(plan->rotary_dim, 8);
  ASSERT_EQ(plan->rope_tables.size(), 1u);
  EXPECT_EQ(plan->rope_tables[0].size(), 4u);
}

TEST(DecoderPlan, FusedSlicesOutOfOrderAreRefusedNamingTheSlice) {
  graph::Graph graph = family_graph({{"model_type", "phi3"}});
  for (graph::Node& node : graph.nodes) {  // v's columns read as k's and k's as v's
    if (node.name == "layers.0.attn.k_slice") node.attributes["begin"] = 96;
    if (node.name == "layers.0.attn.v_slice") node.attributes["begin"] = 64;
  }
  expect_refused_naming(graph, "layers.0.attn.k_slice");
}

TEST(DecoderPlan, GemmaScalesEmbeddingsAndUsesUnitOffsetNormsAndGeglu) {
  Result<DecoderPlan> plan = plan_decoder(family_graph({{"model_type", "gemma"}}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_FLOAT_EQ(plan->embedding_scale, 8.0f);  // sqrt(64)
  EXPECT_EQ(plan->activation, Activation::kGeluTanh);
  EXPECT_TRUE(plan->layers[0].input_norm.unit_offset);
  EXPECT_TRUE(plan->layers[0].post_attention_norm.unit_offset);
  EXPECT_TRUE(plan->final_norm.unit_offset);
  EXPECT_EQ(plan->lm_head, plan->embedding);
  EXPECT_EQ(plan->logit_softcap, 0.0f);
}

TEST(DecoderPlan, Gemma3HasPostNormsWindowsLocalRopeAndSoftcap) {
  Result<DecoderPlan> plan =
      plan_decoder(family_graph({{"model_type", "gemma3_text"},
                                 {"head_dim", 16},
                                 {"sliding_window", 8},
                                 {"layer_types", {"sliding_attention", "full_attention"}},
                                 {"rope_local_base_freq", 10000.0},
                                 {"rope_theta", 1000000.0},
                                 {"final_logit_softcapping", 30.0},
                                 {"query_pre_attn_scalar", 24}}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_EQ(plan->layers.size(), 2u);
  const LayerPlan& local = plan->layers[0];
  const LayerPlan& global = plan->layers[1];
  EXPECT_EQ(local.window, 8);
  EXPECT_EQ(global.window, 0);
  EXPECT_NE(local.rope_table, global.rope_table);
  EXPECT_EQ(plan->rope_tables.size(), 2u);
  EXPECT_TRUE(local.q_norm.unit_offset);
  EXPECT_EQ(local.attention_output_norm.weight, "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(local.post_attention_norm.weight, "model.layers.0.pre_feedforward_layernorm.weight");
  EXPECT_EQ(local.mlp_output_norm.weight, "model.layers.0.post_feedforward_layernorm.weight");
  EXPECT_FLOAT_EQ(plan->logit_softcap, 30.0f);
  EXPECT_FLOAT_EQ(plan->attention_scale, 1.0f / std::sqrt(24.0f));
}

TEST(DecoderPlan, MistralWindowShorterThanTheCacheIsKept) {
  Result<DecoderPlan> plan =
      plan_decoder(family_graph({{"model_type", "mistral"}, {"sliding_window", 16}}));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->layers[0].window, 16);
  EXPECT_FALSE(plan->layers[0].plain());
}

TEST(DecoderPlan, MistralWithAWindowAsLongAsTheCacheIsALlamaGraph) {
  Result<DecoderPlan> plan =
      plan_decoder(family_graph({{"model_type", "mistral"}, {"sliding_window", 64}}, 64));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->layers[0].plain());
}

TEST(DecoderPlan, InconsistentLayersAreRefusedNamingTheNode) {
  graph::Graph graph = decode_graph("tests/fixtures/llama_gqa");
  for (graph::Node& node : graph.nodes) {
    if (node.name == "layers.1.attn.k_rope") node.attributes["rotary_dim"] = 8;
  }
  expect_refused_naming(graph, "layers.1.attn.k_rope");  // not q's rotation
  graph = decode_graph("tests/fixtures/llama_gqa");
  for (graph::Node& node : graph.nodes) {
    if (node.name == "layers.1.mlp.silu_mul") node.op = "gelu_tanh_mul";
  }
  expect_refused_naming(graph, "layers.1.mlp.silu_mul");  // not layer 0's activation
}

TEST(DecoderPlan, AUnitOffsetFinalNormIsCarried) {
  graph::Graph graph = decode_graph("tests/fixtures/llama_gqa");
  for (graph::Node& node : graph.nodes) {
    if (node.name == "final_norm") node.attributes["unit_offset"] = true;
  }
  Result<DecoderPlan> plan = plan_decoder(graph);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->final_norm.unit_offset);
  EXPECT_FALSE(plan->layers[0].input_norm.unit_offset);
}

}  // namespace
}  // namespace kvrt::engine::cuda
