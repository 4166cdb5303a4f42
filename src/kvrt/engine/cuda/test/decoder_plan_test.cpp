// The CUDA engine's plan, on machines without a GPU: every fixture's method graphs match
// the decoder pattern with the right shapes and weights, and what the engine cannot run
// is refused at init with NotSupported naming it.
#include "kvrt/engine/cuda/decoder_plan.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(plan->rope_inv_freq.size(), static_cast<size_t>(plan->head_dim / 2));
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

TEST(DecoderPlan, OtherFamiliesAreNotSupportedNamingTheNode) {
  expect_refused_naming(family_graph({{"model_type", "gemma"}}), "embed_scale");
  expect_refused_naming(family_graph({{"model_type", "gemma3_text"}, {"head_dim", 16}}),
                        "embed_scale");
  expect_refused_naming(family_graph({{"model_type", "qwen3"}, {"head_dim", 16}}),
                        "layers.0.attn.q_norm");
  expect_refused_naming(family_graph({{"model_type", "phi3"}}), "layers.0.attn.q_slice");
  expect_refused_naming(family_graph({{"model_type", "mistral"}, {"sliding_window", 16}}),
                        "layers.0.attn.attention");
}

TEST(DecoderPlan, MistralWithAWindowAsLongAsTheCacheIsALlamaGraph) {
  Result<DecoderPlan> plan =
      plan_decoder(family_graph({{"model_type", "mistral"}, {"sliding_window", 64}}, 64));
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
}

TEST(DecoderPlan, PartialRotaryAndUnitOffsetNormsAreRefusedInALlamaShape) {
  graph::Graph graph = decode_graph("tests/fixtures/llama_gqa");
  for (graph::Node& node : graph.nodes) {
    if (node.name == "layers.1.attn.k_rope") node.attributes["rotary_dim"] = 8;
  }
  expect_refused_naming(graph, "layers.1.attn.k_rope");
  graph = decode_graph("tests/fixtures/llama_gqa");
  for (graph::Node& node : graph.nodes) {
    if (node.name == "final_norm") node.attributes["unit_offset"] = true;
  }
  expect_refused_naming(graph, "final_norm");
}

}  // namespace
}  // namespace kvrt::engine::cuda
