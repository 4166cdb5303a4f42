#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "config_samples.h"
#include "kvrt/frontend/llama_graph.h"
#include "kvrt/frontend/llama_weights.h"
#include "test_util.h"

namespace kvrt::frontend {
namespace {

using graph::Dim;
using graph::Graph;
using graph::ValueKind;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace testing::samples;  // NOLINT: config fixtures

ModelConfig config_of(const json& text) {
  auto config = parse_model_config(text, "config.json");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : ModelConfig();
}

// A shape-only index holding exactly the tensors the config implies.
std::vector<TensorRecord> records_for(const ModelConfig& config, DType dtype) {
  std::vector<TensorRecord> records;
  for (const ExpectedTensor& t : expected_llama_tensors(config)) {
    records.push_back({t.name, dtype, t.shape, 0, 0});
  }
  return records;
}

WeightIndex index_for(const ModelConfig& config, DType dtype = DType::kBF16) {
  return std::move(WeightIndex::shape_only(records_for(config, dtype))).value();
}

Graph build_ok(const ModelConfig& config, const WeightIndex& weights, BuildOptions options) {
  auto graph = build_llama_graph(config, weights, options);
  EXPECT_TRUE(graph.ok()) << graph.status().to_string();
  return graph.ok() ? std::move(graph).value() : Graph();
}

const graph::Node& node(const Graph& g, std::string_view name) {
  for (const graph::Node& n : g.nodes) {
    if (n.name == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return g.nodes.front();
}

const graph::Value& value(const Graph& g, std::string_view name) {
  return g.values[static_cast<size_t>(g.find_value(name).value())];
}

std::string input_name(const Graph& g, const graph::Node& n, size_t i) {
  return g.values[static_cast<size_t>(n.inputs.at(i))].name;
}

TEST(LlamaGraph, TinyLlamaPrefillHasTheDocumentedLayout) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  const Graph g = build_ok(config, index_for(config), {MethodKind::kPrefill, 512, 128});
  EXPECT_TRUE(g.validate().ok());
  EXPECT_EQ(g.nodes.size(), 1u + 17u * 22u + 4u);  // + final norm, take_last, head, argmax
  EXPECT_EQ(g.mutations.size(), 2u * 22u);
  // 9 tensors per layer + embedding + final norm + lm_head.
  size_t params = 0;
  size_t buffers = 0;
  for (const graph::Value& v : g.values) {
    params += v.kind == ValueKind::kParameter;
    buffers += v.kind == ValueKind::kBuffer;
  }
  EXPECT_EQ(params, 9u * 22u + 3u);
  EXPECT_EQ(buffers, 44u);

  ASSERT_EQ(g.inputs.size(), 2u);
  const graph::Value& tokens = g.values[static_cast<size_t>(g.inputs[0])];
  EXPECT_EQ(tokens.name, "tokens");
  EXPECT_EQ(tokens.dtype, DType::kI32);
  EXPECT_EQ(tokens.shape, (std::vector<Dim>{Dim::fixed(1), Dim::dynamic("T", 1, 128)}));
  const graph::Value& position = g.values[static_cast<size_t>(g.inputs[1])];
  EXPECT_EQ(position.name, "position");
  EXPECT_EQ(position.shape, (std::vector<Dim>{Dim::fixed(1)}));

  ASSERT_EQ(g.outputs.size(), 2u);
  const graph::Value& logits = g.values[static_cast<size_t>(g.outputs[0])];
  EXPECT_EQ(logits.name, "logits");
  EXPECT_EQ(logits.dtype, DType::kF32);
  EXPECT_EQ(logits.shape, (std::vector<Dim>{Dim::fixed(1), Dim::fixed(32000)}));
  // The greedy choice, made where the logits are.
  const graph::Value& next = g.values[static_cast<size_t>(g.outputs[1])];
  EXPECT_EQ(next.name, "next_token");
  EXPECT_EQ(next.dtype, DType::kI32);
  EXPECT_EQ(next.shape, (std::vector<Dim>{Dim::fixed(1), Dim::fixed(1)}));
  EXPECT_EQ(g.nodes.back().op, "argmax");
  EXPECT_EQ(input_name(g, g.nodes.back(), 0), "logits");

  const graph::Value& cache = value(g, "k_cache.21");
  EXPECT_EQ(cache.kind, ValueKind::kBuffer);
  EXPECT_EQ(cache.dtype, DType::kF32);
  EXPECT_EQ(cache.shape, (std::vector<Dim>{Dim::fixed(4), Dim::fixed(512), Dim::fixed(64)}));
  const graph::Value& q_weight = value(g, "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(q_weight.kind, ValueKind::kParameter);
  EXPECT_EQ(q_weight.dtype, DType::kBF16);
  EXPECT_EQ(value(g, "layers.0.attn.k_proj").shape,
            (std::vector<Dim>{Dim::dynamic("T", 1, 128), Dim::fixed(256)}));
  EXPECT_EQ(value(g, "layers.0.mlp.silu_mul").shape,
            (std::vector<Dim>{Dim::dynamic("T", 1, 128), Dim::fixed(5632)}));
  EXPECT_EQ(g.nodes.front().name, "embed_tokens");
  const graph::Node& head = g.nodes[g.nodes.size() - 2];
  EXPECT_EQ(head.name, "lm_head");
  EXPECT_EQ(input_name(g, head, 1), "lm_head.weight");
}

TEST(LlamaGraph, EveryCacheWriteIsAMutationAndFeedsAttention) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  const Graph g = build_ok(config, index_for(config), {MethodKind::kDecode, 256, 0});
  for (const graph::BufferMutation& m : g.mutations) {
    const std::string buffer = g.values[static_cast<size_t>(m.buffer)].name;
    EXPECT_EQ(g.values[static_cast<size_t>(m.updated)].name, buffer + ".updated");
  }
  const graph::Node& attention = node(g, "layers.5.attn.attention");
  EXPECT_EQ(attention.op, "attention");
  EXPECT_EQ(input_name(g, attention, 0), "layers.5.attn.q_rope");
  EXPECT_EQ(input_name(g, attention, 1), "k_cache.5.updated");
  EXPECT_EQ(input_name(g, attention, 2), "v_cache.5.updated");
  EXPECT_EQ(input_name(g, attention, 3), "position");
  EXPECT_EQ(attention.attributes["num_heads"], 32);
  EXPECT_EQ(attention.attributes["num_kv_heads"], 4);
  EXPECT_EQ(attention.attributes["head_dim"], 64);
  EXPECT_DOUBLE_EQ(attention.attributes["scale"].get<double>(), 0.125);
  const graph::Node& write = node(g, "layers.5.attn.k_cache_write");
  EXPECT_EQ(write.op, "kv_cache_write");
  EXPECT_EQ(input_name(g, write, 0), "k_cache.5");
  EXPECT_EQ(input_name(g, write, 1), "layers.5.attn.k_rope");
  EXPECT_EQ(input_name(g, node(g, "layers.5.attn.v_cache_write"), 1), "layers.5.attn.v_proj");
}

TEST(LlamaGraph, DecodeHasOneTokenAndSharesBufferNamesWithPrefill) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  const WeightIndex weights = index_for(config);
  const Graph decode = build_ok(config, weights, {MethodKind::kDecode, 256, 0});
  const Graph prefill = build_ok(config, weights, {MethodKind::kPrefill, 256, 0});
  EXPECT_EQ(value(decode, "tokens").shape, (std::vector<Dim>{Dim::fixed(1), Dim::fixed(1)}));
  EXPECT_EQ(value(prefill, "tokens").shape[1], Dim::dynamic("T", 1, 256));  // max_prompt = S
  for (const graph::Value& v : prefill.values) {
    if (v.kind != ValueKind::kBuffer) continue;
    EXPECT_EQ(value(decode, v.name).shape, v.shape) << v.name;
  }
  EXPECT_EQ(decode.nodes.size(), prefill.nodes.size());
}

TEST(LlamaGraph, RopeAttributesCarryLlama3Scaling) {
  const ModelConfig config = config_of(llama32_1b());
  const Graph g = build_ok(config, index_for(config), {MethodKind::kDecode, 0, 0});
  const graph::Node& q_rope = node(g, "layers.0.attn.q_rope");
  EXPECT_EQ(q_rope.attributes["num_heads"], 32);
  EXPECT_EQ(q_rope.attributes["head_dim"], 64);
  EXPECT_DOUBLE_EQ(q_rope.attributes["theta"].get<double>(), 500000.0);
  EXPECT_EQ(q_rope.attributes["scaling"]["type"], "llama3");
  EXPECT_DOUBLE_EQ(q_rope.attributes["scaling"]["factor"].get<double>(), 32.0);
  EXPECT_EQ(node(g, "layers.0.attn.k_rope").attributes["num_heads"], 8);
  EXPECT_DOUBLE_EQ(node(g, "layers.0.input_norm").attributes["eps"].get<double>(), 1e-5);
  // Default max_seq is min(max_position_embeddings, 2048).
  EXPECT_EQ(value(g, "v_cache.0").shape[1], Dim::fixed(2048));
}

TEST(LlamaGraph, TiedEmbeddingsFeedTheFinalLinear) {
  const ModelConfig config = config_of(llama32_1b());
  const Graph g = build_ok(config, index_for(config), {MethodKind::kDecode, 64, 0});
  EXPECT_EQ(input_name(g, node(g, "lm_head"), 1), "model.embed_tokens.weight");
  EXPECT_EQ(input_name(g, node(g, "embed_tokens"), 1), "model.embed_tokens.weight");
  EXPECT_FALSE(g.find_value("lm_head.weight").has_value());
}

TEST(LlamaGraph, Qwen2HasQkvBiasesOnly) {
  const ModelConfig config = config_of(qwen2_0_5b());
  const Graph g = build_ok(config, index_for(config), {MethodKind::kPrefill, 1024, 0});
  EXPECT_EQ(node(g, "layers.0.attn.q_proj").inputs.size(), 3u);
  EXPECT_EQ(input_name(g, node(g, "layers.0.attn.q_proj"), 2),
            "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(node(g, "layers.0.attn.k_proj").inputs.size(), 3u);
  EXPECT_EQ(node(g, "layers.0.attn.v_proj").inputs.size(), 3u);
  EXPECT_EQ(node(g, "layers.0.attn.o_proj").inputs.size(), 2u);
  EXPECT_EQ(node(g, "layers.0.mlp.down_proj").inputs.size(), 2u);
  EXPECT_EQ(value(g, "k_cache.0").shape,
            (std::vector<Dim>{Dim::fixed(2), Dim::fixed(1024), Dim::fixed(64)}));
}

TEST(LlamaGraph, LlamaAttentionAndMlpBiasesAreWired) {
  json text = tinyllama_1_1b();
  text["attention_bias"] = true;
  text["mlp_bias"] = true;
  text["num_hidden_layers"] = 1;
  const ModelConfig config = config_of(text);
  const Graph g = build_ok(config, index_for(config), {MethodKind::kDecode, 64, 0});
  for (const char* name : {"layers.0.attn.q_proj", "layers.0.attn.o_proj", "layers.0.mlp.gate_proj",
                           "layers.0.mlp.up_proj", "layers.0.mlp.down_proj"}) {
    EXPECT_EQ(node(g, name).inputs.size(), 3u) << name;
  }
}

TEST(LlamaGraph, CacheDtypeIsAnOption) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  const Graph g = build_ok(config, index_for(config), {MethodKind::kDecode, 64, 0, DType::kF16});
  EXPECT_EQ(value(g, "k_cache.0").dtype, DType::kF16);
  EXPECT_EQ(value(g, "k_cache.0.updated").dtype, DType::kF16);
  auto bad =
      build_llama_graph(config, index_for(config), {MethodKind::kDecode, 64, 0, DType::kI32});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("cache dtype i32"));
}

TEST(LlamaGraph, OutOfRangeSequenceOptionsAreRefused) {
  const ModelConfig config = config_of(tinyllama_1_1b());  // max_position_embeddings 2048
  const WeightIndex weights = index_for(config);
  auto too_long = build_llama_graph(config, weights, {MethodKind::kPrefill, 4096, 0});
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.status().message(), HasSubstr("max_seq 4096 is outside 1..2048"));
  auto negative = build_llama_graph(config, weights, {MethodKind::kPrefill, -1, 0});
  EXPECT_FALSE(negative.ok());
  auto prompt = build_llama_graph(config, weights, {MethodKind::kPrefill, 128, 129});
  ASSERT_FALSE(prompt.ok());
  EXPECT_THAT(prompt.status().message(), HasSubstr("max_prompt 129 is outside 1..128"));
}

TEST(LlamaGraph, MissingTensorIsRefusedNamingItAndItsShape) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  std::vector<TensorRecord> records = records_for(config, DType::kBF16);
  std::erase_if(
      records, [](const TensorRecord& r) { return r.name == "model.layers.7.mlp.up_proj.weight"; });
  auto weights = WeightIndex::shape_only(records);
  auto g = build_llama_graph(config, *weights, {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'model.layers.7.mlp.up_proj.weight'"), HasSubstr("[5632, 2048]")));
}

TEST(LlamaGraph, UntiedCheckpointWithoutLmHeadIsRefused) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  std::vector<TensorRecord> records = records_for(config, DType::kBF16);
  std::erase_if(records, [](const TensorRecord& r) { return r.name == "lm_head.weight"; });
  auto g = build_llama_graph(config, *WeightIndex::shape_only(records), {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("'lm_head.weight'"));
}

TEST(LlamaGraph, ShapeMismatchIsRefusedNamingBothShapes) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  std::vector<TensorRecord> records = records_for(config, DType::kBF16);
  for (TensorRecord& r : records) {
    if (r.name == "model.layers.0.self_attn.k_proj.weight") r.shape = {2048, 2048};
  }
  auto g = build_llama_graph(config, *WeightIndex::shape_only(records), {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(),
              AllOf(HasSubstr("'model.layers.0.self_attn.k_proj.weight'"),
                    HasSubstr("shape [2048, 2048]"), HasSubstr("config implies [256, 2048]")));
}

TEST(LlamaGraph, NonFloatingWeightIsRefused) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  std::vector<TensorRecord> records = records_for(config, DType::kBF16);
  records[0].dtype = DType::kI32;
  auto g = build_llama_graph(config, *WeightIndex::shape_only(records), {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), AllOf(HasSubstr(records[0].name), HasSubstr("dtype i32")));
}

TEST(LlamaGraph, UnexpectedTensorIsRefused) {
  const ModelConfig config = config_of(tinyllama_1_1b());  // attention_bias false
  std::vector<TensorRecord> records = records_for(config, DType::kBF16);
  records.push_back({"model.layers.0.self_attn.o_proj.bias", DType::kBF16, {2048}, 0, 0});
  auto g = build_llama_graph(config, *WeightIndex::shape_only(records), {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(),
              HasSubstr("'model.layers.0.self_attn.o_proj.bias' is not part"));
}

TEST(LlamaGraph, SavedRotaryInvFreqIsTolerated) {
  const ModelConfig config = config_of(tinyllama_1_1b());
  std::vector<TensorRecord> records = records_for(config, DType::kBF16);
  records.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", DType::kF32, {32}, 0, 0});
  auto g = build_llama_graph(config, *WeightIndex::shape_only(records), {});
  EXPECT_TRUE(g.ok()) << g.status().to_string();
}

TEST(LlamaGraph, TiedCheckpointWithStoredLmHeadMustMatchTheTable) {
  json text = tinyllama_1_1b();
  text.update({{"hidden_size", 8},
               {"intermediate_size", 16},
               {"num_hidden_layers", 1},
               {"num_attention_heads", 2},
               {"num_key_value_heads", 1},
               {"vocab_size", 4},
               {"tie_word_embeddings", true}});
  const ModelConfig config = config_of(text);
  testing::TempDir dir;
  std::vector<ExpectedTensor> specs = expected_llama_tensors(config);
  ASSERT_TRUE(testing::write_random_weights(dir.path(), specs, DType::kF32).ok());
  auto weights = WeightIndex::open_dir(dir.path());
  ASSERT_TRUE(weights.ok());
  auto table = weights->view("model.embed_tokens.weight");
  ASSERT_TRUE(table.ok());
  std::vector<float> values(table->data_as<const float>(), table->data_as<const float>() + 32);

  // Same bytes as the table: accepted, and the graph still uses the table.
  std::vector<TensorToWrite> tensors;
  std::vector<std::vector<std::byte>> storage;
  for (const WeightEntry& entry : weights->entries()) {
    auto bytes = weights->bytes(entry);
    storage.emplace_back(bytes->begin(), bytes->end());
  }
  size_t k = 0;
  for (const WeightEntry& entry : weights->entries()) {
    tensors.push_back({entry.record.name, entry.record.dtype, entry.record.shape, storage[k++]});
  }
  tensors.push_back({"lm_head.weight", DType::kF32, {4, 8}, testing::as_bytes(values)});
  ASSERT_TRUE(write_safetensors(dir.file("same.safetensors"), tensors).ok());
  auto same = WeightIndex::open_file(dir.file("same.safetensors"));
  ASSERT_TRUE(same.ok());
  const Graph g = build_ok(config, *same, {MethodKind::kDecode, 16, 0});
  EXPECT_EQ(input_name(g, node(g, "lm_head"), 1), "model.embed_tokens.weight");

  values[3] += 1.0f;  // now it differs: HF would silently use the table, we refuse
  tensors.back().data = testing::as_bytes(values);
  ASSERT_TRUE(write_safetensors(dir.file("differs.safetensors"), tensors).ok());
  auto differs = WeightIndex::open_file(dir.file("differs.safetensors"));
  ASSERT_TRUE(differs.ok());
  auto refused = build_llama_graph(config, *differs, {MethodKind::kDecode, 16, 0});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("differs from 'model.embed_tokens.weight'"));
}

TEST(LlamaGraph, BuiltGraphRoundTripsThroughJson) {
  json text = qwen2_0_5b();
  text["num_hidden_layers"] = 2;
  const ModelConfig config = config_of(text);
  const Graph g = build_ok(config, index_for(config), {MethodKind::kPrefill, 512, 64});
  const json doc = graph::to_json(g);
  auto parsed = graph::graph_from_json_text(doc.dump(), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(graph::to_json(*parsed), doc);
}

TEST(LlamaGraph, ExpectedTensorsFollowTheConfig) {
  json text = tinyllama_1_1b();
  text["num_hidden_layers"] = 1;
  const ModelConfig untied = config_of(text);
  EXPECT_EQ(expected_llama_tensors(untied).size(), 1u + 9u + 1u + 1u);
  text["tie_word_embeddings"] = true;
  EXPECT_EQ(expected_llama_tensors(config_of(text)).size(), 1u + 9u + 1u);
  json qwen = qwen2_0_5b();
  qwen["num_hidden_layers"] = 1;
  EXPECT_EQ(expected_llama_tensors(config_of(qwen)).size(), 1u + 12u + 1u);
}

}  // namespace
}  // namespace kvrt::frontend
