#include "kvrt/partition/partitioner.h"

#include <gtest/gtest.h>

#include "kvrt/partition/test/tiny_llama_graph.h"

namespace kvrt::partition {
namespace {

using kvrt::testing::tiny_llama_graph;
using kvrt::testing::TinyLlama;

TEST(Partitioner, EverySupportedNodeGoesToOneEnginePartition) {
  const graph::Graph g = tiny_llama_graph(TinyLlama{}, /*prefill=*/false);
  auto plan = partition_graph(g, {});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_EQ(plan->partitions.size(), 1u);
  EXPECT_EQ(plan->partitions[0].first, 0u);
  EXPECT_EQ(plan->partitions[0].count, g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    EXPECT_EQ(plan->placement[n], Placement::kEngine) << g.nodes[n].name;
    EXPECT_EQ(plan->partition_of[n], 0);
  }
}

TEST(Partitioner, ForcedHostNodeSplitsThePartitionInTwo) {
  const graph::Graph g = tiny_llama_graph(TinyLlama{}, false);
  PartitionOptions options;
  options.force_host = {"final_norm"};
  auto plan = partition_graph(g, options);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->partitions.size(), 2u);
  const size_t host = plan->partitions[0].count;
  EXPECT_EQ(g.nodes[host].name, "final_norm");
  EXPECT_EQ(plan->placement[host], Placement::kHost);
  EXPECT_EQ(plan->partition_of[host], -1);
  EXPECT_EQ(plan->partitions[1].first, host + 1);
  EXPECT_EQ(plan->partitions[1].count, 2u);  // take_last, lm_head
  EXPECT_TRUE(plan->unmatched_force_host.empty());
}

TEST(Partitioner, ForceHostByOpNameMovesEveryNodeOfThatOp) {
  const graph::Graph g = tiny_llama_graph(TinyLlama{}, false);
  PartitionOptions options;
  options.force_host = {"rms_norm"};
  auto plan = partition_graph(g, options);
  ASSERT_TRUE(plan.ok());
  size_t host_nodes = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const bool is_norm = g.nodes[n].op == "rms_norm";
    EXPECT_EQ(plan->placement[n] == Placement::kHost, is_norm) << g.nodes[n].name;
    host_nodes += is_norm;
  }
  EXPECT_EQ(host_nodes, 5u);               // 2 per layer + final
  EXPECT_EQ(plan->partitions.size(), 6u);  // the runs between the five norms
}

TEST(Partitioner, BuffersAreInNoPartition_B1) {
  // Buffers are values: a partition is a node range, so it can only receive them.
  const graph::Graph g = tiny_llama_graph(TinyLlama{}, false);
  auto plan = partition_graph(g, {});
  ASSERT_TRUE(plan.ok());
  for (const graph::Node& node : g.nodes) {
    for (graph::ValueId out : node.outputs) {
      EXPECT_NE(g.values[static_cast<size_t>(out)].kind, graph::ValueKind::kBuffer);
    }
  }
}

TEST(Partitioner, UnknownForceHostNameIsReported) {
  const graph::Graph g = tiny_llama_graph(TinyLlama{}, false);
  PartitionOptions options;
  options.force_host = {"final_norm", "finalnorm"};
  auto plan = partition_graph(g, options);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->unmatched_force_host, std::vector<std::string>{"finalnorm"});
}

TEST(Partitioner, UnknownOpIsNotSupportedNamingTheNode) {
  graph::Graph g = tiny_llama_graph(TinyLlama{}, false);
  g.nodes[3].op = "gelu";
  auto plan = partition_graph(g, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::kNotSupported);
  EXPECT_NE(plan.status().message().find(g.nodes[3].name), std::string::npos);
}

TEST(Partitioner, InvalidGraphIsRefused) {
  graph::Graph g = tiny_llama_graph(TinyLlama{}, false);
  g.mutations.pop_back();
  EXPECT_EQ(partition_graph(g, {}).status().code(), ErrorCode::kInvalidProgram);
}

TEST(Partitioner, VocabularyMatchesTheGraphDoc) {
  for (std::string_view op : {"embedding", "rms_norm", "linear", "rope", "kv_cache_write",
                              "attention", "silu_mul", "add", "take_last"}) {
    EXPECT_TRUE(engine_supports(op)) << op;
  }
  EXPECT_FALSE(is_known_op("softmax"));
}

}  // namespace
}  // namespace kvrt::partition
