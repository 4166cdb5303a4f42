// Engine delegate execute on the CPU engine (D1-D6). Every rejected call is followed
// by a good one on the same handle: a bad call changes nothing and breaks nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kvrt/delegate/engine_delegate.h"
#include "kvrt/delegate/test/delegate_test_util.h"
#include "kvrt/engine/cpu/test/tiny_llama.h"

namespace kvrt::delegate {
namespace {

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

class EngineDelegateExecute : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::vector<std::byte>> bytes = testing::write(parts);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    blob = std::move(bytes).value();
    Result<std::unique_ptr<DelegateHandle>> h =
        make_engine_backend()->init(blob, model.weights, {});
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    handle = std::move(h).value();
    store = std::make_unique<testing::ArgStore>(handle->signature());
    good_step(5);
  }

  // Decodes `token` at the next position and checks the logits against the reference.
  void good_step(int32_t token) {
    store->set_tokens({token}, static_cast<int32_t>(history.size()));
    std::vector<TensorView> args = store->views();
    Status status = handle->execute(args);
    ASSERT_TRUE(status.ok()) << status.to_string();
    history.push_back(token);
    EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
  }

  // A call with `args` must fail with `code` naming `needle`, change nothing, and leave
  // the handle working.
  void expect_rejected(std::vector<TensorView> args, ErrorCode code, std::string_view needle) {
    const auto before = store->buffers();
    Status status = handle->execute(args);
    EXPECT_EQ(status.code(), code) << status.to_string();
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.to_string();
    EXPECT_TRUE(store->buffers() == before) << "a rejected call wrote caller storage";
    good_step(9);
  }

  size_t arg(std::string_view name) const {
    const format::BlobMetadata& sig = handle->signature();
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      if (sig.inputs[i].name == name) return i;
    }
    for (size_t o = 0; o < sig.outputs.size(); ++o) {
      if (sig.outputs[o].name == name) return sig.inputs.size() + o;
    }
    ADD_FAILURE() << "no binding " << name;
    return 0;
  }

  std::vector<TensorView> next_args(int32_t token = 7) {
    store->set_tokens({token}, static_cast<int32_t>(history.size()));
    return store->views();
  }

  kvrt::testing::TinyModel model = kvrt::testing::make_tiny_model({});
  testing::BlobParts parts = testing::blob_parts(model.method_graph(1, 4));
  std::vector<std::byte> blob;
  std::unique_ptr<DelegateHandle> handle;
  std::unique_ptr<testing::ArgStore> store;
  std::vector<int32_t> history;
};

TEST_F(EngineDelegateExecute, WrongArgumentCountIsRejected_D1) {
  std::vector<TensorView> args = next_args();
  args.pop_back();
  expect_rejected(args, ErrorCode::kInvalidArgument, "expects 11 arguments");
}

TEST_F(EngineDelegateExecute, WrongDtypeIsRejectedNamingTheBinding_D1) {
  std::vector<TensorView> args = next_args();
  args[1] = TensorView(args[1].data(), DType::kF32, {1});
  expect_rejected(args, ErrorCode::kInvalidArgument, "input 'position' (argument 1): dtype f32");
}

TEST_F(EngineDelegateExecute, WrongRankIsRejected_D1) {
  std::vector<TensorView> args = next_args();
  args[0] = TensorView(args[0].data(), DType::kI32, {1});
  expect_rejected(args, ErrorCode::kInvalidArgument, "'tokens'");
}

TEST_F(EngineDelegateExecute, ShapeOutsideTheBindingBoundsIsRejected_D1) {
  std::vector<int32_t> five(5, 1);
  std::vector<TensorView> args = next_args();
  args[0] = TensorView(five.data(), DType::kI32, {1, 5});  // T is 1..4
  expect_rejected(args, ErrorCode::kInvalidArgument, "outside");
  args = next_args();
  args[arg("logits")] =
      TensorView(args[arg("logits")].data(), DType::kF32, {1, model.config.vocab - 1});
  expect_rejected(args, ErrorCode::kInvalidArgument, "output 'logits'");
}

TEST_F(EngineDelegateExecute, NonContiguousTensorIsRejected_D1) {
  std::vector<TensorView> args = next_args();
  const TensorView cache = args[2];
  // The same bytes with column-major strides.
  args[2] = TensorView(cache.data(), cache.dtype(), cache.shape(),
                       {1, cache.dim(0), cache.dim(0) * cache.dim(1)}, Device::cpu());
  expect_rejected(args, ErrorCode::kInvalidArgument, "must be contiguous");
}

TEST_F(EngineDelegateExecute, NullStorageIsRejected_D1) {
  std::vector<TensorView> args = next_args();
  args[arg("logits")] = TensorView(nullptr, DType::kF32, args[arg("logits")].shape());
  expect_rejected(args, ErrorCode::kInvalidArgument, "null storage");
}

TEST_F(EngineDelegateExecute, PlainInputOnAnotherDeviceIsRejected_D1) {
  std::vector<TensorView> args = next_args();
  args[0] = TensorView(args[0].data(), DType::kI32, args[0].shape(), Device::cuda(0));
  expect_rejected(args, ErrorCode::kInvalidArgument, "is on cuda:0");
}

TEST_F(EngineDelegateExecute, AliasedInputNotOnTheEngineDeviceIsRejected_D2) {
  std::vector<TensorView> args = next_args();
  args[2] = TensorView(args[2].data(), args[2].dtype(), args[2].shape(), Device::cuda(0));
  expect_rejected(args, ErrorCode::kInvalidArgument,
                  "aliased input 'k_cache.0' must be device memory on cpu");
}

TEST_F(EngineDelegateExecute, AliasedOutputGivenTheInputsStorageCopiesNothing_D3) {
  good_step(11);
  const ExecuteStats stats = handle->last_stats();
  EXPECT_EQ(stats.total_bytes(), 0);
  for (int64_t bytes : stats.arg_bytes) EXPECT_EQ(bytes, 0);
}

TEST_F(EngineDelegateExecute, AliasedOutputGivenOtherStorageIsReflected_D3) {
  std::vector<TensorView> args = next_args(12);
  const TensorView& cache = args[2];
  std::vector<uint8_t> mirror(static_cast<size_t>(*cache.nbytes()), 0xee);
  args[arg("k_cache.0.updated")] = TensorView(mirror.data(), cache.dtype(), cache.shape());
  ASSERT_TRUE(handle->execute(args).ok());
  history.push_back(12);
  EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
  // The update landed in the input's storage (the cache persists) and in the mirror.
  EXPECT_EQ(mirror, store->buffer("k_cache.0"));
  const ExecuteStats stats = handle->last_stats();
  EXPECT_EQ(stats.reflect_bytes, static_cast<int64_t>(mirror.size()));
  EXPECT_EQ(stats.arg_bytes[arg("k_cache.0.updated")], static_cast<int64_t>(mirror.size()));
  good_step(13);
}

TEST_F(EngineDelegateExecute, AliasedOutputPartiallyOverlappingItsInputIsRejected_D3) {
  std::vector<TensorView> args = next_args();
  float* base = args[2].data_as<float>();
  args[arg("k_cache.0.updated")] = TensorView(base + 1, args[2].dtype(), args[2].shape());
  expect_rejected(args, ErrorCode::kInvalidArgument, "partially overlaps");
}

TEST_F(EngineDelegateExecute, PositionPastTheCacheChangesNothing) {
  store->set_tokens({3}, static_cast<int32_t>(model.config.max_seq));
  expect_rejected(store->views(), ErrorCode::kInvalidArgument, "cache capacity");
}

TEST_F(EngineDelegateExecute, OutputViewsAreResizedToTheProducedShape_D5) {
  std::vector<TensorView> args = next_args(4);
  ASSERT_TRUE(handle->execute(args).ok());
  history.push_back(4);
  EXPECT_EQ(args[arg("logits")].shape(), (Shape{1, model.config.vocab}));
  EXPECT_EQ(args[arg("k_cache.0.updated")].shape(), args[2].shape());
}

TEST_F(EngineDelegateExecute, ConcurrentCallsOnOneHandleAreSerialized_D6) {
  // Two threads share the handle, each with its own caches: results stay exact.
  auto decode = [&](std::vector<float>* logits) {
    testing::ArgStore own(handle->signature());
    for (int32_t p = 0; p < 6; ++p) {
      own.set_tokens({static_cast<int32_t>(3 + p)}, p);
      std::vector<TensorView> args = own.views();
      if (!handle->execute(args).ok()) return;
    }
    *logits = own.floats("logits");
  };
  std::vector<float> a, b;
  std::thread ta(decode, &a), tb(decode, &b);
  ta.join();
  tb.join();
  const std::vector<float> expected = model.reference_logits({3, 4, 5, 6, 7, 8});
  EXPECT_LT(max_abs_diff(a, expected), 1e-4);
  EXPECT_LT(max_abs_diff(b, expected), 1e-4);
  good_step(2);
}

TEST_F(EngineDelegateExecute, DifferentHandlesRunConcurrently_D6) {
  Result<std::unique_ptr<DelegateHandle>> other =
      make_engine_backend()->init(blob, model.weights, {});
  ASSERT_TRUE(other.ok());
  auto decode = [&](DelegateHandle* h, std::vector<float>* logits) {
    testing::ArgStore own(h->signature());
    for (int32_t p = 0; p < 6; ++p) {
      own.set_tokens({static_cast<int32_t>(20 - p)}, p);
      std::vector<TensorView> args = own.views();
      if (!h->execute(args).ok()) return;
    }
    *logits = own.floats("logits");
  };
  std::vector<float> a, b;
  std::thread ta(decode, handle.get(), &a), tb(decode, other->get(), &b);
  ta.join();
  tb.join();
  const std::vector<float> expected = model.reference_logits({20, 19, 18, 17, 16, 15});
  EXPECT_LT(max_abs_diff(a, expected), 1e-4);
  EXPECT_LT(max_abs_diff(b, expected), 1e-4);
}

class UserAliasExecute : public ::testing::Test {
 protected:
  void SetUp() override {
    graph::Graph g;
    const graph::Dim t = graph::Dim::dynamic("T", 0, 4);
    const graph::ValueId x =
        g.add_value({"x", DType::kF32, {t, graph::Dim::fixed(2)}, graph::ValueKind::kInput});
    const graph::ValueId y = g.add_value({"y", DType::kF32, {t, graph::Dim::fixed(2)}});
    g.nodes.push_back({"double", "add", {x, x}, {y}, nlohmann::json::object()});
    g.inputs = {x};
    g.outputs = {y};
    testing::BlobParts parts = testing::blob_parts(g);
    parts.metadata.aliases.push_back({"y", "x", format::AliasKind::kUser});
    blob = *testing::write(parts);
    handle = std::move(make_engine_backend()->init(blob, weights, {})).value();
  }
  kvrt::testing::TinyWeights weights;
  std::vector<std::byte> blob;
  std::unique_ptr<DelegateHandle> handle;
};

TEST_F(UserAliasExecute, EmptyAliasedInputIsRejectedBeforeAnyZeroSizePath_D2) {
  std::vector<float> x = {1, 2};
  std::vector<TensorView> args = {TensorView(x.data(), DType::kF32, {0, 2}),
                                  TensorView(x.data(), DType::kF32, {0, 2})};
  Status status = handle->execute(args);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("aliased input 'x' must be non-empty"), std::string::npos);
  args = {TensorView(x.data(), DType::kF32, {1, 2}), TensorView(x.data(), DType::kF32, {1, 2})};
  ASSERT_TRUE(handle->execute(args).ok());
  EXPECT_EQ(x, (std::vector<float>{2, 4}));
}

}  // namespace
}  // namespace kvrt::delegate
