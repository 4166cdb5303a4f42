#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kvrt/graph/graph.h"
#include "test_graphs.h"

namespace kvrt::graph {
namespace {

using ::testing::HasSubstr;
using testing::tiny_graph;

ValueId id_of(const Graph& g, std::string_view name) {
  return g.find_value(name).value();
}
Node& node_named(Graph& g, std::string_view name) {
  for (Node& node : g.nodes) {
    if (node.name == name) return node;
  }
  ADD_FAILURE() << "no node " << name;
  return g.nodes.front();
}

// Expects validate() to fail with InvalidProgram and a message containing `text`.
void expect_invalid(const Graph& g, std::string_view text) {
  Status status = g.validate();
  ASSERT_FALSE(status.ok()) << "expected an error containing: " << text;
  EXPECT_EQ(status.code(), ErrorCode::kInvalidProgram);
  EXPECT_THAT(status.message(), HasSubstr(std::string(text)));
}

TEST(GraphValidate, TinyGraphIsValid) {
  Status status = tiny_graph().validate();
  EXPECT_TRUE(status.ok()) << status.to_string();
}

TEST(GraphValidate, AddValueReturnsSequentialIdsAndFindValueLooksUpByName) {
  Graph g;
  EXPECT_EQ(g.add_value({"a", DType::kF32, {}, ValueKind::kInput}), 0);
  EXPECT_EQ(g.add_value({"b", DType::kF32, {}, ValueKind::kInput}), 1);
  EXPECT_EQ(g.find_value("b"), 1);
  EXPECT_EQ(g.find_value("missing"), std::nullopt);
}

TEST(GraphValidate, EmptyValueNameIsRejected) {
  Graph g = tiny_graph();
  g.values[0].name = "";
  expect_invalid(g, "value 0 has an empty name");
}

TEST(GraphValidate, DuplicateValueNameIsRejected) {
  Graph g = tiny_graph();
  g.values[id_of(g, "k_proj")].name = "embed";
  expect_invalid(g, "value name 'embed' is used twice");
}

TEST(GraphValidate, RankAboveSixIsRejected) {
  Graph g = tiny_graph();
  g.values[id_of(g, "k.weight")].shape.assign(7, Dim::fixed(1));
  expect_invalid(g, "value 'k.weight' has rank 7");
}

TEST(GraphValidate, NegativeStaticDimIsRejected) {
  Graph g = tiny_graph();
  g.values[id_of(g, "k.weight")].shape[0] = Dim::fixed(-2);
  expect_invalid(g, "value 'k.weight' has an invalid dim");
}

TEST(GraphValidate, DynamicDimWithMinAboveMaxIsRejected) {
  Graph g = tiny_graph();
  g.values[id_of(g, "tokens")].shape[1] = Dim::dynamic("T", 5, 4);
  expect_invalid(g, "value 'tokens' has an invalid dim in shape [1, T]");
}

TEST(GraphValidate, NodeInputIdOutOfRangeIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").inputs[1] = 99;
  expect_invalid(g, "node 'k_proj' input refers to value id 99, out of range");
}

TEST(GraphValidate, NegativeNodeOutputIdIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").outputs[0] = -1;
  expect_invalid(g, "node 'k_proj' output refers to value id -1");
}

TEST(GraphValidate, DuplicateNodeNameIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").name = "embed";
  expect_invalid(g, "node name 'embed' is used twice");
}

TEST(GraphValidate, EmptyOpIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").op = "";
  expect_invalid(g, "node 'k_proj' has an empty op");
}

TEST(GraphValidate, NonObjectAttributesAreRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").attributes = nlohmann::json::array();
  expect_invalid(g, "node 'k_proj' attributes must be an object");
}

TEST(GraphValidate, NodeWithoutOutputsIsRejected) {
  Graph g = tiny_graph();
  g.nodes.push_back({"dangling", "add", {0, 0}, {}, nlohmann::json::object()});
  expect_invalid(g, "node 'dangling' has no outputs");
}

TEST(GraphValidate, IntermediateWithTwoProducersIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").outputs[0] = id_of(g, "embed");
  expect_invalid(g, "value 'embed' is produced by both node 'embed' and node 'k_proj'");
}

TEST(GraphValidate, IntermediateWithoutProducerIsRejected) {
  Graph g = tiny_graph();
  g.add_value({"orphan", DType::kF32, {}, ValueKind::kIntermediate});
  expect_invalid(g, "intermediate value 'orphan' has no producer");
}

TEST(GraphValidate, NodeWritingANonIntermediateIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").outputs[0] = id_of(g, "k.weight");
  expect_invalid(g, "node 'k_proj' outputs parameter value 'k.weight'");
}

TEST(GraphValidate, NodesOutOfTopologicalOrderAreRejected) {
  Graph g = tiny_graph();
  std::swap(g.nodes[0], g.nodes[1]);
  expect_invalid(g, "node 'k_proj' reads 'embed' before its producer 'embed'");
}

TEST(GraphValidate, NodeReadingItsOwnOutputIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_proj").inputs[0] = id_of(g, "k_proj");
  expect_invalid(g, "node 'k_proj' reads 'k_proj' before its producer 'k_proj'");
}

TEST(GraphValidate, InputMissingFromGraphInputsIsRejected) {
  Graph g = tiny_graph();
  g.inputs = {id_of(g, "tokens")};
  expect_invalid(g, "input value 'position' is not listed in graph inputs");
}

TEST(GraphValidate, GraphInputOutOfRangeIsRejected) {
  Graph g = tiny_graph();
  g.inputs.push_back(1234);
  expect_invalid(g, "graph input 2 refers to value id 1234");
}

TEST(GraphValidate, ParameterListedAsGraphInputIsRejected) {
  Graph g = tiny_graph();
  g.inputs.push_back(id_of(g, "k.weight"));
  expect_invalid(g, "graph input 'k.weight' is a parameter value");
}

TEST(GraphValidate, DuplicateGraphInputIsRejected) {
  Graph g = tiny_graph();
  g.inputs.push_back(id_of(g, "tokens"));
  expect_invalid(g, "value 'tokens' is listed twice in graph inputs");
}

TEST(GraphValidate, BufferListedAsGraphInputIsAccepted) {
  Graph g = tiny_graph();  // a partition subgraph receives its caches as inputs
  g.inputs.push_back(id_of(g, "k_cache.0"));
  g.outputs.push_back(id_of(g, "k_cache.0.updated"));
  Status status = g.validate();
  EXPECT_TRUE(status.ok()) << status.to_string();
}

TEST(GraphValidate, GraphOutputOutOfRangeIsRejected) {
  Graph g = tiny_graph();
  g.outputs = {-3};
  expect_invalid(g, "graph output 0 refers to value id -3");
}

TEST(GraphValidate, DuplicateGraphOutputIsRejected) {
  Graph g = tiny_graph();
  g.outputs.push_back(g.outputs[0]);
  expect_invalid(g, "value 'attention' is listed twice in graph outputs");
}

TEST(GraphValidate, MissingMutationForCacheWriteIsRejected) {
  Graph g = tiny_graph();
  g.mutations.clear();
  expect_invalid(g, "kv_cache_write node 'k_write' output 'k_cache.0.updated' is not declared");
}

TEST(GraphValidate, MutationOfNonBufferIsRejected) {
  Graph g = tiny_graph();
  g.mutations[0].buffer = id_of(g, "k.weight");
  expect_invalid(g, "mutation 0: 'k.weight' is a parameter value, not a buffer");
}

TEST(GraphValidate, MutationIdOutOfRangeIsRejected) {
  Graph g = tiny_graph();
  g.mutations[0].updated = 77;
  expect_invalid(g, "mutation 0 updated refers to value id 77");
}

TEST(GraphValidate, MutationUpdatedNotFromCacheWriteIsRejected) {
  Graph g = tiny_graph();
  g.mutations[0].updated = id_of(g, "k_proj");
  expect_invalid(g, "mutation 0: updated value 'k_proj' is not produced by a kv_cache_write");
}

TEST(GraphValidate, MutationPairingTheWrongBufferIsRejected) {
  Graph g = tiny_graph();
  ValueId other = g.add_value({"v_cache.0",
                               DType::kF32,
                               {Dim::fixed(1), Dim::fixed(16), Dim::fixed(4)},
                               ValueKind::kBuffer});
  g.mutations[0].buffer = other;
  expect_invalid(g, "mutation 0: node 'k_write' writes 'k_cache.0', not buffer 'v_cache.0'");
}

TEST(GraphValidate, DuplicateMutationIsRejected) {
  Graph g = tiny_graph();
  g.mutations.push_back(g.mutations[0]);
  expect_invalid(g, "buffer 'k_cache.0' has more than one mutation");
}

TEST(GraphValidate, CacheWriteToNonBufferIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_write").inputs[0] = id_of(g, "k_proj");
  expect_invalid(g, "kv_cache_write node 'k_write' writes intermediate value 'k_proj'");
}

TEST(GraphValidate, CacheWriteWithoutInputsIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "k_write").inputs.clear();
  expect_invalid(g, "kv_cache_write node 'k_write' needs a cache input and exactly one output");
}

TEST(GraphValidate, TwoWritesToOneBufferAreRejected) {
  Graph g = tiny_graph();
  ValueId second =
      g.add_value({"k_cache.0.again", DType::kF32, {Dim::fixed(1), Dim::fixed(16), Dim::fixed(4)}});
  g.nodes.push_back({"k_write_again",
                     "kv_cache_write",
                     {id_of(g, "k_cache.0"), id_of(g, "k_proj"), id_of(g, "position")},
                     {second},
                     nlohmann::json::object()});
  expect_invalid(g, "node 'k_write_again' reads buffer 'k_cache.0' after node 'k_write' wrote it");
}

TEST(GraphValidate, ReadingStaleBufferAfterWriteIsRejected) {
  Graph g = tiny_graph();
  node_named(g, "attention").inputs[1] = id_of(g, "k_cache.0");
  expect_invalid(g, "node 'attention' reads buffer 'k_cache.0' after node 'k_write' wrote it");
}

TEST(GraphValidate, ValueKindNamesRoundTrip) {
  for (ValueKind kind :
       {ValueKind::kInput, ValueKind::kParameter, ValueKind::kBuffer, ValueKind::kIntermediate}) {
    auto parsed = parse_value_kind(value_kind_name(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_FALSE(parse_value_kind("weight").ok());
}

}  // namespace
}  // namespace kvrt::graph
