#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kvrt/graph/graph.h"
#include "test_graphs.h"

namespace kvrt::graph {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::tiny_graph;

void expect_rejected(const json& doc, std::string_view text) {
  auto graph = graph_from_json(doc);
  ASSERT_FALSE(graph.ok()) << "expected an error containing: " << text;
  EXPECT_EQ(graph.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_THAT(graph.status().message(), HasSubstr(std::string(text)));
}

TEST(GraphJson, RoundTripPreservesEverything) {
  const Graph original = tiny_graph();
  const json doc = to_json(original);
  auto parsed = graph_from_json(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(to_json(*parsed), doc);
  ASSERT_EQ(parsed->values.size(), original.values.size());
  for (size_t i = 0; i < original.values.size(); ++i) {
    EXPECT_EQ(parsed->values[i].name, original.values[i].name);
    EXPECT_EQ(parsed->values[i].dtype, original.values[i].dtype);
    EXPECT_EQ(parsed->values[i].kind, original.values[i].kind);
    EXPECT_EQ(parsed->values[i].shape, original.values[i].shape);
  }
  ASSERT_EQ(parsed->nodes.size(), original.nodes.size());
  for (size_t i = 0; i < original.nodes.size(); ++i) {
    EXPECT_EQ(parsed->nodes[i].name, original.nodes[i].name);
    EXPECT_EQ(parsed->nodes[i].op, original.nodes[i].op);
    EXPECT_EQ(parsed->nodes[i].inputs, original.nodes[i].inputs);
    EXPECT_EQ(parsed->nodes[i].outputs, original.nodes[i].outputs);
    EXPECT_EQ(parsed->nodes[i].attributes, original.nodes[i].attributes);
  }
  EXPECT_EQ(parsed->inputs, original.inputs);
  EXPECT_EQ(parsed->outputs, original.outputs);
  ASSERT_EQ(parsed->mutations.size(), 1u);
  EXPECT_EQ(parsed->mutations[0].buffer, original.mutations[0].buffer);
  EXPECT_EQ(parsed->mutations[0].updated, original.mutations[0].updated);
}

TEST(GraphJson, TextRoundTripKeepsEscapesAndNonAsciiNames) {
  Graph original = tiny_graph();
  original.values[0].name = "tök\"ens\\\n\u00e9";
  original.nodes[0].attributes["note"] = "quote \" and tab \t";
  auto parsed = graph_from_json_text(to_json(original).dump(), "blob");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->values[0].name, original.values[0].name);
  EXPECT_EQ(parsed->nodes[0].attributes["note"], "quote \" and tab \t");
}

TEST(GraphJson, DynamicDimsKeepTheirBounds) {
  auto parsed = graph_from_json(to_json(tiny_graph()));
  ASSERT_TRUE(parsed.ok());
  const Dim& t = parsed->values[0].shape[1];
  EXPECT_TRUE(t.is_dynamic());
  EXPECT_EQ(t.symbol, "T");
  EXPECT_EQ(t.min, 1);
  EXPECT_EQ(t.max, 16);
}

TEST(GraphJson, InvalidJsonTextIsRejectedNamingTheSource) {
  auto parsed = graph_from_json_text("{\"values\": [", "delegate blob 'prefill.0'");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("delegate blob 'prefill.0'"));
}

TEST(GraphJson, NonObjectRootIsRejected) {
  expect_rejected(json::array(), "expected an object");
}

TEST(GraphJson, UnknownTopLevelFieldIsRejected) {
  json doc = to_json(tiny_graph());
  doc["extra"] = 1;
  expect_rejected(doc, "extra: unknown field");
}

TEST(GraphJson, MissingTopLevelFieldIsRejected) {
  for (const char* field :
       {"format", "version", "values", "nodes", "inputs", "outputs", "mutations"}) {
    json doc = to_json(tiny_graph());
    doc.erase(field);
    expect_rejected(doc, std::string(field) + ": missing");
  }
}

TEST(GraphJson, WrongFormatIsRejected) {
  json doc = to_json(tiny_graph());
  doc["format"] = "onnx";
  expect_rejected(doc, "format: expected \"kvrt.graph\"");
}

TEST(GraphJson, NewerVersionIsRejected) {
  json doc = to_json(tiny_graph());
  doc["version"] = 2;
  expect_rejected(doc, "version: unsupported version 2");
}

TEST(GraphJson, NonArrayListsAreRejected) {
  for (const char* field : {"values", "nodes", "mutations"}) {
    json doc = to_json(tiny_graph());
    doc[field] = json::object();
    expect_rejected(doc, std::string(field) + ": expected an array");
  }
  json doc = to_json(tiny_graph());
  doc["inputs"] = "tokens";
  expect_rejected(doc, "inputs: expected an array of value ids");
}

TEST(GraphJson, ValueFieldErrorsNameTheField) {
  struct Case {
    const char* field;
    json bad;
    const char* message;
  };
  const Case cases[] = {
      {"name", 5, "values[2].name: expected a string"},
      {"dtype", "f64", "values[2].dtype: unknown dtype 'f64'"},
      {"dtype", json(), "values[2].dtype: expected a string"},
      {"kind", "weight", "values[2].kind: unknown value kind 'weight'"},
      {"shape", 3, "values[2].shape: expected an array"},
      {"shape", json::array({8, -1}), "values[2].shape[1]: value -1 is outside"},
      {"shape", json::array({8, 1.5}), "values[2].shape[1]: expected an integer"},
      {"shape", json::array({8, true}), "values[2].shape[1]: expected an object"},
      {"shape", json::array({8, 18446744073709551615ull}),
       "values[2].shape[1]: integer out of range"},
  };
  for (const Case& c : cases) {
    json doc = to_json(tiny_graph());
    doc["values"][2][c.field] = c.bad;
    expect_rejected(doc, c.message);
  }
  json doc = to_json(tiny_graph());
  doc["values"][2]["alias"] = "x";
  expect_rejected(doc, "values[2].alias: unknown field");
  doc = to_json(tiny_graph());
  doc["values"][2].erase("kind");
  expect_rejected(doc, "values[2].kind: missing");
}

TEST(GraphJson, DynamicDimFieldErrorsNameTheField) {
  json doc = to_json(tiny_graph());
  doc["values"][0]["shape"][1] = {{"symbol", "T"}, {"min", 4}, {"max", 2}};
  expect_rejected(doc, "values[0].shape[1].max: value 2 is outside 4..");
  doc["values"][0]["shape"][1] = {{"symbol", ""}, {"min", 1}, {"max", 2}};
  expect_rejected(doc, "values[0].shape[1].symbol: must not be empty");
  doc["values"][0]["shape"][1] = {{"symbol", "T"}, {"min", 1}};
  expect_rejected(doc, "values[0].shape[1].max: missing");
  doc["values"][0]["shape"][1] = {{"symbol", "T"}, {"min", 1}, {"max", 2}, {"step", 1}};
  expect_rejected(doc, "values[0].shape[1].step: unknown field");
}

TEST(GraphJson, NodeFieldErrorsNameTheField) {
  struct Case {
    const char* field;
    json bad;
    const char* message;
  };
  const Case cases[] = {
      {"name", json::array(), "nodes[1].name: expected a string"},
      {"op", 7, "nodes[1].op: expected a string"},
      {"inputs", json::array({5, "x"}), "nodes[1].inputs[1]: expected an integer"},
      {"inputs", json::array({-1}), "nodes[1].inputs[0]: value -1 is outside"},
      {"inputs", json::array({4294967296ll}), "nodes[1].inputs[0]: value 4294967296 is outside"},
      {"outputs", json::object(), "nodes[1].outputs: expected an array of value ids"},
      {"attributes", json::array(), "nodes[1].attributes: expected an object"},
  };
  for (const Case& c : cases) {
    json doc = to_json(tiny_graph());
    doc["nodes"][1][c.field] = c.bad;
    expect_rejected(doc, c.message);
  }
}

TEST(GraphJson, MutationFieldErrorsNameTheField) {
  json doc = to_json(tiny_graph());
  doc["mutations"][0]["buffer"] = "k_cache.0";
  expect_rejected(doc, "mutations[0].buffer: expected an integer");
  doc = to_json(tiny_graph());
  doc["mutations"][0].erase("updated");
  expect_rejected(doc, "mutations[0].updated: missing");
  doc = to_json(tiny_graph());
  doc["mutations"][0] = 3;
  expect_rejected(doc, "mutations[0]: expected an object");
}

TEST(GraphJson, StructurallyInvalidGraphIsRejectedByValidation) {
  json doc = to_json(tiny_graph());
  doc["nodes"][1]["inputs"][0] = 200;  // in int32 range, but no such value
  expect_rejected(doc, "node 'k_proj' input refers to value id 200, out of range");
  doc = to_json(tiny_graph());
  doc["mutations"] = json::array();
  expect_rejected(doc, "is not declared as a buffer mutation");
}

}  // namespace
}  // namespace kvrt::graph
