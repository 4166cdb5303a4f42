// The CUDA engine's plan, on machines without a GPU: every fixture's method graphs match
// the decoder pattern with the right shapes and weights, and what the engine cannot run
// is refused at init with NotSupported naming it.
#include "kvrt/engine/cuda/decoder_plan.h"

#include <gtest/gtest.h>

#include "kvrt/export/exporter.h"
#include "kvrt/frontend/checkpoint.h"

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

}  // namespace
}  // namespace kvrt::engine::cuda
