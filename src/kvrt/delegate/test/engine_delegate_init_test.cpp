// Engine delegate init: the blob is checked against the engine before any execute
// (C1-C4), and the backend registry.
#include <gtest/gtest.h>

#include <string>

#include "kvrt/delegate/engine_delegate.h"
#include "kvrt/delegate/test/delegate_test_util.h"
#include "kvrt/delegate/test/fake_device.h"
#include "kvrt/engine/cpu/test/tiny_llama.h"

namespace kvrt::delegate {
namespace {

using testing::blob_parts;
using testing::BlobParts;

// y = x + x over x f32 [T=0..4, 2]: an output the engine does not write in place.
graph::Graph doubling_graph() {
  graph::Graph g;
  const graph::Dim t = graph::Dim::dynamic("T", 0, 4);
  const graph::ValueId x =
      g.add_value({"x", DType::kF32, {t, graph::Dim::fixed(2)}, graph::ValueKind::kInput});
  const graph::ValueId y = g.add_value({"y", DType::kF32, {t, graph::Dim::fixed(2)}});
  g.nodes.push_back({"double", "add", {x, x}, {y}, nlohmann::json::object()});
  g.inputs = {x};
  g.outputs = {y};
  return g;
}

class EngineDelegateInit : public ::testing::Test {
 protected:
  kvrt::testing::TinyModel model = kvrt::testing::make_tiny_model({.layers = 1});
  BlobParts parts = blob_parts(model.method_graph(1, 4));

  Result<std::unique_ptr<DelegateHandle>> init(const BlobParts& p, DelegateOptions options = {}) {
    Result<std::vector<std::byte>> bytes = testing::write(p);
    if (!bytes.ok()) return bytes.status();
    blob_ = std::move(bytes).value();
    return make_engine_backend()->init(blob_, model.weights, options);
  }
  Result<std::unique_ptr<DelegateHandle>> init_bytes(const std::vector<std::byte>& bytes,
                                                     DelegateOptions options = {}) {
    blob_ = bytes;
    return make_engine_backend()->init(blob_, model.weights, options);
  }

  std::vector<std::byte> blob_;
};

void expect_invalid_program(const Result<std::unique_ptr<DelegateHandle>>& handle,
                            std::string_view needle) {
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.status().code(), ErrorCode::kInvalidProgram) << handle.status().to_string();
  EXPECT_NE(handle.status().message().find(needle), std::string::npos)
      << handle.status().to_string();
}

TEST_F(EngineDelegateInit, ExposesTheBlobSignatureInArgumentOrder) {
  Result<std::unique_ptr<DelegateHandle>> handle = init(parts);
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  const format::BlobMetadata& sig = (*handle)->signature();
  ASSERT_EQ(sig.inputs.size(), 4u);
  EXPECT_EQ(sig.inputs[0].name, "tokens");
  EXPECT_EQ(sig.inputs[2].name, "k_cache.0");
  EXPECT_EQ(sig.outputs[0].name, "logits");
  EXPECT_EQ(sig.outputs[1].name, "k_cache.0.updated");
  EXPECT_TRUE((*handle)->device().is_cpu());
}

TEST_F(EngineDelegateInit, KvCacheAliasThatDisagreesWithTheEngineIsRejected_C1) {
  // Swapped: the blob says k's update aliases v's cache and vice versa.
  parts.metadata.aliases[0].input = "v_cache.0";
  parts.metadata.aliases[1].input = "k_cache.0";
  expect_invalid_program(init(parts), "k_cache.0.updated");
}

TEST_F(EngineDelegateInit, KvCacheAliasOnAnOutputTheEngineDoesNotWriteIsRejected_C1) {
  BlobParts doubling = blob_parts(doubling_graph());
  doubling.metadata.aliases.push_back({"y", "x", format::AliasKind::kKvCacheUpdate});
  expect_invalid_program(init(doubling), "does not write any input");
}

TEST_F(EngineDelegateInit, UserAliasIsTrustedWhenStorageMatches_C2) {
  BlobParts doubling = blob_parts(doubling_graph());
  doubling.metadata.aliases.push_back({"y", "x", format::AliasKind::kUser});
  Result<std::unique_ptr<DelegateHandle>> handle = init(doubling);
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  // The output is bound to the input's storage: the engine doubles x in place.
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<TensorView> args = {TensorView(x.data(), DType::kF32, {2, 2}),
                                  TensorView(x.data(), DType::kF32, {2, 2})};
  ASSERT_TRUE((*handle)->execute(args).ok());
  EXPECT_EQ(x, (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ((*handle)->last_stats().total_bytes(), 0);
}

TEST_F(EngineDelegateInit, UserAliasWithMismatchedDtypeIsRejectedAtInit_C2) {
  BlobParts doubling = blob_parts(doubling_graph());
  doubling.metadata.aliases.push_back({"y", "x", format::AliasKind::kUser});
  Result<std::vector<std::byte>> bytes = testing::write(doubling);
  ASSERT_TRUE(bytes.ok());
  // write_blob refuses such a blob, so forge one: y becomes f16.
  ASSERT_TRUE(
      testing::patch(*bytes, R"({"dtype":"f32","name":"y")", R"({"dtype":"f16","name":"y")"));
  Result<std::unique_ptr<DelegateHandle>> handle = init_bytes(*bytes);
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(handle.status().message().find("dtype"), std::string::npos);
}

TEST_F(EngineDelegateInit, UserAliasOnAnOutputTheEngineWritesInPlaceIsRejected_C2) {
  parts.metadata.aliases[0].kind = format::AliasKind::kUser;
  expect_invalid_program(init(parts), "must be kv_cache_update");
}

TEST_F(EngineDelegateInit, EngineAliasMissingFromTheBlobIsRejected_C3) {
  parts.metadata.aliases.pop_back();  // v_cache.0.updated no longer declared
  expect_invalid_program(init(parts), "v_cache.0.updated");
}

TEST_F(EngineDelegateInit, BlobBindingUnknownToTheEngineIsRejected) {
  parts.metadata.inputs[1].name = "pos";
  expect_invalid_program(init(parts), "'pos'");
}

TEST_F(EngineDelegateInit, EngineOutputMissingFromTheBlobIsRejected) {
  // Drop v's update and its alias: the blob is valid on its own but incomplete.
  parts.metadata.outputs.pop_back();
  parts.metadata.aliases.pop_back();
  expect_invalid_program(init(parts), "v_cache.0.updated");
}

TEST_F(EngineDelegateInit, BindingDtypeOrShapeDisagreeingWithTheEngineIsRejected) {
  BlobParts wrong_dtype = parts;
  wrong_dtype.metadata.inputs[1].dtype = DType::kI64;
  expect_invalid_program(init(wrong_dtype), "position");
  BlobParts wrong_bound = parts;
  wrong_bound.metadata.inputs[0].shape[1].max = 64;  // engine takes T up to 4
  expect_invalid_program(init(wrong_bound), "tokens");
}

TEST_F(EngineDelegateInit, MalformedBlobIsRejected) {
  std::vector<std::byte> garbage(200, std::byte{0x41});
  expect_invalid_program(init_bytes(garbage), "");
}

TEST_F(EngineDelegateInit, BlobForAnotherDeviceIsRejected) {
  parts.metadata.target_device = "cuda";
  Result<std::unique_ptr<DelegateHandle>> handle = init(parts);
  EXPECT_EQ(handle.status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(EngineDelegateInit, MissingEngineTargetIsNotFound) {
  engine::unregister_engine_target(DeviceType::kCuda);
  DelegateOptions options;
  options.device = Device::cuda(0);
  const Status status = init(parts, options).status();
  EXPECT_EQ(status.code(), ErrorCode::kNotFound);
  // The delegate sniffs for no engine: an unregistered target says how to get one.
  EXPECT_NE(status.message().find("register_builtin_targets"), std::string::npos)
      << status.to_string();
}

class EngineDelegateInitOnDevice : public EngineDelegateInit {
 protected:
  void SetUp() override {
    ASSERT_TRUE(engine::register_engine_target(testing::fake_cuda_target()).ok());
  }
  void TearDown() override { engine::unregister_engine_target(DeviceType::kCuda); }
};

TEST_F(EngineDelegateInitOnDevice, InitRestoresTheCallersDeviceOnSuccessAndFailure_C4) {
  testing::FakeDeviceApi& fake = testing::fake_device();
  DelegateOptions options;
  options.device = Device::cuda(0);
  fake.current = Device::cuda(3);
  Result<std::unique_ptr<DelegateHandle>> handle = init(parts, options);
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  EXPECT_EQ(fake.current, Device::cuda(3));
  parts.metadata.aliases.pop_back();
  fake.current = Device::cuda(5);
  EXPECT_FALSE(init(parts, options).ok());
  EXPECT_EQ(fake.current, Device::cuda(5));
  handle->reset();
  EXPECT_EQ(fake.current, Device::cuda(5));
}

TEST(BackendRegistry, FindsTheEngineBackendAndRejectsUnknownNames) {
  Result<std::shared_ptr<const Backend>> engine = find_backend("engine");
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ((*engine)->name(), "engine");
  EXPECT_EQ(find_backend("tensorrt").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(register_backend(nullptr).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvrt::delegate
