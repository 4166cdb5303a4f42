// The CPU engine on a tiny random Llama: logits against an independent double-precision
// forward pass, aliasing derived from its own ops (C1), and failed calls writing nothing.
#include "kvrt/engine/cpu/cpu_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kvrt/engine/cpu/test/tiny_llama.h"

namespace kvrt::engine::cpu {
namespace {

using testing::make_tiny_model;
using testing::TinyConfig;
using testing::TinyModel;

// Owns the caches and logits of one "program" and binds them for each call.
struct Harness {
  const TinyModel& model;
  std::unique_ptr<Engine> engine;
  std::vector<std::vector<uint8_t>> caches;
  std::vector<float> logits;

  Harness(const TinyModel& m, int64_t t_min, int64_t t_max) : model(m) {
    Result<std::unique_ptr<Engine>> built =
        build_cpu_engine(m.method_graph(t_min, t_max), m.weights, EngineOptions{});
    EXPECT_TRUE(built.ok()) << built.status().to_string();
    if (built.ok()) engine = std::move(built).value();
    const int64_t bytes = m.config.kv_heads * m.config.max_seq * m.config.head_dim *
                          static_cast<int64_t>(dtype_size(m.config.cache_dtype));
    caches.assign(m.buffer_names().size(), std::vector<uint8_t>(static_cast<size_t>(bytes)));
    logits.assign(static_cast<size_t>(m.config.vocab), 0.0f);
  }

  Status run(std::vector<int32_t> tokens, int32_t position) {
    const Shape cache_shape{model.config.kv_heads, model.config.max_seq, model.config.head_dim};
    KVRT_RETURN_IF_ERROR(
        engine->set_tensor("tokens", tokens.data(), {1, static_cast<int64_t>(tokens.size())}));
    KVRT_RETURN_IF_ERROR(engine->set_tensor("position", &position, {1}));
    const std::vector<std::string> names = model.buffer_names();
    for (size_t i = 0; i < names.size(); ++i) {
      KVRT_RETURN_IF_ERROR(engine->set_tensor(names[i], caches[i].data(), cache_shape));
      KVRT_RETURN_IF_ERROR(
          engine->set_tensor(names[i] + ".updated", caches[i].data(), cache_shape));
    }
    KVRT_RETURN_IF_ERROR(engine->set_tensor("logits", logits.data(), {1, model.config.vocab}));
    return engine->enqueue(nullptr);
  }
};

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

TEST(CpuEngine, StatesEachCacheOutputAliasFromItsOwnOps_C1) {
  TinyModel model = make_tiny_model({});
  Harness h(model, 1, 8);
  ASSERT_TRUE(h.engine);
  EXPECT_EQ(h.engine->inputs().size(), 2 + model.buffer_names().size());
  EXPECT_EQ(h.engine->outputs().size(), 1 + model.buffer_names().size());
  EXPECT_EQ(h.engine->outputs()[0].name, "logits");
  EXPECT_FALSE(h.engine->aliased_input("logits").has_value());
  EXPECT_EQ(h.engine->aliased_input("k_cache.1.updated"), "k_cache.1");
  EXPECT_EQ(h.engine->aliased_input("v_cache.0.updated"), "v_cache.0");
  EXPECT_FALSE(h.engine->aliased_input("no_such_output").has_value());
}

struct Variant {
  const char* name;
  TinyConfig config;
};

class CpuEngineModels : public ::testing::TestWithParam<Variant> {};

TEST_P(CpuEngineModels, PrefillAndDecodeMatchAnIndependentReference) {
  TinyModel model = make_tiny_model(GetParam().config);
  Harness prefill(model, 1, 8);
  Harness decode(model, 1, 1);
  ASSERT_TRUE(prefill.engine && decode.engine);
  std::vector<int32_t> tokens = {3, 17, 5, 29, 11};
  ASSERT_TRUE(prefill.run(tokens, 0).ok());
  EXPECT_LT(max_abs_diff(prefill.logits, model.reference_logits(tokens)), 1e-4);
  // Decode continues from the prefill's caches: hand them over.
  decode.caches = prefill.caches;
  for (int32_t next : {7, 2, 30, 0}) {
    ASSERT_TRUE(decode.run({next}, static_cast<int32_t>(tokens.size())).ok());
    tokens.push_back(next);
    EXPECT_LT(max_abs_diff(decode.logits, model.reference_logits(tokens)), 1e-4)
        << "after " << tokens.size() << " tokens";
  }
}

TEST_P(CpuEngineModels, PrefillThenDecodeEqualsTheLongerPrefill) {
  TinyModel model = make_tiny_model(GetParam().config);
  Harness a(model, 1, 8), b(model, 1, 8);
  ASSERT_TRUE(a.run({4, 9, 1, 22}, 0).ok());
  ASSERT_TRUE(a.run({13}, 4).ok());
  ASSERT_TRUE(b.run({4, 9, 1, 22, 13}, 0).ok());
  // Every output element has one summation order regardless of T: bitwise equal.
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.caches, b.caches);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuEngineModels,
    ::testing::Values(
        Variant{"gqa_f32", {}},
        Variant{"untied_bf16_llama3",
                {.heads = 4,
                 .kv_heads = 1,
                 .head_dim = 8,
                 .tied = false,
                 .llama3_rope = true,
                 .weight_dtype = DType::kBF16,
                 .theta = 500000.0,
                 .seed = 2}},
        Variant{"bias_f16",
                {.bias = true, .weight_dtype = DType::kF16, .theta = 1e6, .eps = 1e-6, .seed = 3}},
        Variant{"bf16_cache", {.cache_dtype = DType::kBF16, .seed = 4}},
        Variant{"f16_cache_mha", {.kv_heads = 4, .cache_dtype = DType::kF16, .seed = 5}}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

TEST(CpuEngine, PositionPastTheCacheWritesNothing) {
  TinyModel model = make_tiny_model({});
  Harness h(model, 1, 8);
  ASSERT_TRUE(h.run({1, 2, 3}, 0).ok());
  const auto caches = h.caches;
  const auto logits = h.logits;
  Status status = h.run({4, 5, 6}, static_cast<int32_t>(model.config.max_seq - 2));
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cache capacity"), std::string::npos) << status.to_string();
  EXPECT_EQ(h.caches, caches);
  EXPECT_EQ(h.logits, logits);
  EXPECT_EQ(h.run({4}, -1).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.caches, caches);
  // Still usable.
  EXPECT_TRUE(h.run({4}, 3).ok());
}

TEST(CpuEngine, TokenOutsideTheVocabularyWritesNothing) {
  TinyModel model = make_tiny_model({});
  Harness h(model, 1, 8);
  const auto caches = h.caches;
  EXPECT_EQ(h.run({1, static_cast<int32_t>(model.config.vocab)}, 0).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.caches, caches);
  EXPECT_TRUE(h.run({1, 2}, 0).ok());
}

TEST(CpuEngine, AliasedOutputBoundToOtherStorageIsRejected) {
  TinyModel model = make_tiny_model({.layers = 1});
  Harness h(model, 1, 1);
  ASSERT_TRUE(h.run({1}, 0).ok());
  std::vector<uint8_t> elsewhere(h.caches[0].size());
  ASSERT_TRUE(h.engine
                  ->set_tensor("k_cache.0.updated", elsewhere.data(),
                               {model.config.kv_heads, model.config.max_seq, model.config.head_dim})
                  .ok());
  Status status = h.engine->enqueue(nullptr);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("k_cache.0.updated"), std::string::npos);
}

TEST(CpuEngine, ShapesOutsideTheDeclaredBoundsAreRejectedAtBind) {
  TinyModel model = make_tiny_model({});
  Harness h(model, 1, 4);
  std::vector<int32_t> tokens(5, 1);
  EXPECT_EQ(h.engine->set_tensor("tokens", tokens.data(), {1, 5}).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.engine->set_tensor("tokens", tokens.data(), {5}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.engine->set_tensor("tokens", nullptr, {1, 2}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.engine->set_tensor("nope", tokens.data(), {1}).code(), ErrorCode::kNotFound);
  EXPECT_EQ(h.engine->enqueue(nullptr).code(), ErrorCode::kInvalidState);  // nothing bound yet
}

TEST(CpuEngine, MissingOrMistypedWeightFailsTheBuild) {
  TinyModel model = make_tiny_model({.layers = 1});
  graph::Graph graph = model.method_graph(1, 1);
  testing::TinyWeights partial;
  Result<std::unique_ptr<Engine>> missing = build_cpu_engine(graph, partial, EngineOptions{});
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  testing::TinyWeights wrong = model.weights;
  wrong.add("model.norm.weight", DType::kF32, {model.config.hidden + 1},
            std::vector<float>(static_cast<size_t>(model.config.hidden + 1), 1.0f));
  Result<std::unique_ptr<Engine>> mistyped = build_cpu_engine(graph, wrong, EngineOptions{});
  EXPECT_EQ(mistyped.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(mistyped.status().message().find("model.norm.weight"), std::string::npos);
}

TEST(CpuEngine, UndeclaredInPlaceWriteIsRefused) {
  TinyModel model = make_tiny_model({.layers = 1});
  graph::Graph graph = model.method_graph(1, 1);
  graph.mutations.pop_back();  // v_cache.0's update is no longer an output
  Result<std::unique_ptr<Engine>> built = build_cpu_engine(graph, model.weights, EngineOptions{});
  EXPECT_EQ(built.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(built.status().message().find("v_cache.0"), std::string::npos);
}

TEST(CpuEngine, BuildsFromTheJsonPayload) {
  TinyModel model = make_tiny_model({});
  const std::string text = graph::to_json(model.method_graph(1, 8)).dump();
  Result<std::unique_ptr<Engine>> built = build_cpu_engine(
      std::as_bytes(std::span(text.data(), text.size())), model.weights, EngineOptions{});
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  EXPECT_EQ((*built)->aliased_input("k_cache.0.updated"), "k_cache.0");
  const std::string bad = "{not json";
  EXPECT_FALSE(build_cpu_engine(std::as_bytes(std::span(bad.data(), bad.size())), model.weights,
                                EngineOptions{})
                   .ok());
}

TEST(CpuEngine, CudaDeviceIsRefused) {
  TinyModel model = make_tiny_model({.layers = 1});
  EngineOptions options;
  options.device = Device::cuda(0);
  EXPECT_EQ(build_cpu_engine(model.method_graph(1, 1), model.weights, options).status().code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvrt::engine::cpu
