// The engine delegate's device paths on a fake cuda:0 whose streams only run when
// waited on: aliased host inputs (D2), staging (D4), resize checks (D5), streams and
// in-flight tracking (E1-E3). The same code drives the real CUDA engine.
#include <gtest/gtest.h>

#include <cmath>

#include "kvrt/delegate/engine_delegate.h"
#include "kvrt/delegate/test/delegate_test_util.h"
#include "kvrt/delegate/test/fake_device.h"
#include "kvrt/engine/cpu/test/tiny_llama.h"

namespace kvrt::delegate {
namespace {

using testing::FakeDeviceApi;

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

class EngineDelegateOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(engine::register_engine_target(testing::fake_cuda_target()).ok());
    fake.forget_registered_memory();
    testing::fake_engine_options() = {};
    testing::engines_destroyed_in_flight() = 0;
    testing::reconfigured_in_flight() = 0;
    testing::concurrent_engine_calls() = 0;
    blob = *testing::write(testing::blob_parts(model.method_graph(1, 4)));
    DelegateOptions options;
    options.device = Device::cuda(0);
    Result<std::unique_ptr<DelegateHandle>> h =
        make_engine_backend()->init(blob, model.weights, options);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    handle = std::move(h).value();
    store = std::make_unique<testing::ArgStore>(handle->signature());
    for (auto& [name, bytes] : store->buffers()) {
      fake.register_device_memory(bytes.data(), bytes.size());
    }
    caller_stream = *fake.create_stream();
  }
  void TearDown() override {
    handle.reset();
    fake.destroy_stream(caller_stream);
    EXPECT_EQ(testing::engines_destroyed_in_flight(), 0);
    EXPECT_EQ(testing::reconfigured_in_flight(), 0);
    EXPECT_EQ(testing::concurrent_engine_calls(), 0);
    testing::fake_engine_options() = {};
    fake.fail_copies_after_enqueue = 0;
    fake.fail_record_event = false;
    fake.fail_allocations = 0;
    engine::unregister_engine_target(DeviceType::kCuda);
  }

  std::vector<TensorView> next_args(int32_t token) {
    store->set_tokens({token}, static_cast<int32_t>(history.size()));
    return store->views(Device::cuda(0));
  }
  // A good step with host tokens/position/logits (staged) on the handle's own stream.
  void good_step(int32_t token) {
    std::vector<TensorView> args = next_args(token);
    Status status = handle->execute(args);
    ASSERT_TRUE(status.ok()) << status.to_string();
    history.push_back(token);
    EXPECT_EQ(fake.pending(), 0u);
    EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
  }

  FakeDeviceApi& fake = testing::fake_device();
  kvrt::testing::TinyModel model = kvrt::testing::make_tiny_model({});
  std::vector<std::byte> blob;
  std::unique_ptr<DelegateHandle> handle;
  std::unique_ptr<testing::ArgStore> store;
  engine::StreamHandle caller_stream = nullptr;
  std::vector<int32_t> history;
};

TEST_F(EngineDelegateOnDevice, HostInputsAndOutputsAreStagedAndCachesBoundDirectly_D4) {
  good_step(3);
  const ExecuteStats stats = handle->last_stats();
  EXPECT_EQ(stats.staged_in_bytes, 4 + 4);  // tokens [1,1] i32, position [1] i32
  EXPECT_EQ(stats.staged_out_bytes, 4 * model.config.vocab);
  EXPECT_EQ(stats.reflect_bytes, 0);
  for (size_t a = 2; a < 2 + 2 * static_cast<size_t>(model.config.layers); ++a)
    EXPECT_EQ(stats.arg_bytes[a], 0);
  EXPECT_TRUE(stats.host_synchronized);
  good_step(8);
}

TEST_F(EngineDelegateOnDevice, StagingThatCannotBeAllocatedChangesNothing_D4) {
  good_step(3);
  // Three tokens need a larger staging buffer than the one-token calls before.
  store->set_tokens({4, 5, 6}, 1);
  const auto with_tokens = store->buffers();
  std::vector<TensorView> args = store->views(Device::cuda(0));
  fake.fail_allocations = 1;
  Status status = handle->execute(args);
  EXPECT_EQ(status.code(), ErrorCode::kMemoryAllocationFailed) << status.to_string();
  EXPECT_TRUE(store->buffers() == with_tokens) << "a rejected call wrote caller storage";
  EXPECT_EQ(fake.pending(), 0u);
  good_step(4);
}

TEST_F(EngineDelegateOnDevice, AliasedHostInputIsRejected_D2) {
  good_step(3);
  const int64_t copied = fake.copied_bytes;
  std::vector<TensorView> args = next_args(4);
  args[2] = TensorView(args[2].data(), args[2].dtype(), args[2].shape(), Device::cpu());
  Status status = handle->execute(args);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("aliased input 'k_cache.0' must be device memory on cuda:0"),
            std::string::npos)
      << status.to_string();
  EXPECT_EQ(fake.copied_bytes, copied) << "nothing may be staged for a rejected call";
  good_step(4);
}

TEST_F(EngineDelegateOnDevice, AliasedInputLabelledDeviceButNotDeviceMemoryIsRejected_D2) {
  good_step(3);
  std::vector<TensorView> args = next_args(4);
  std::vector<uint8_t> host_copy = store->buffer("v_cache.1");
  const size_t v1 = 5;  // tokens, position, k0, v0, k1, v1
  args[v1] = TensorView(host_copy.data(), args[v1].dtype(), args[v1].shape(), Device::cuda(0));
  args[handle->signature().inputs.size() + 4] = args[v1];
  Status status = handle->execute(args);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("aliased input 'v_cache.1'"), std::string::npos);
  good_step(4);
}

TEST_F(EngineDelegateOnDevice, OutputShapeThatDoesNotFitIsRejected_D5) {
  good_step(3);
  testing::fake_engine_options().output_shape_override = Shape{1, 2, 3};
  std::vector<TensorView> args = next_args(4);
  Status status = handle->execute(args);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("output 'logits'"), std::string::npos) << status.to_string();
  EXPECT_EQ(fake.pending(), 0u) << "the enqueued run must be drained on the error path (E2)";
  testing::fake_engine_options().output_shape_override = Shape{1, model.config.vocab + 1};
  EXPECT_EQ(handle->execute(args).code(), ErrorCode::kInvalidArgument);
  testing::fake_engine_options().output_shape_override.reset();
  // The rejected runs did execute on the device and wrote the caches at position 1;
  // rewriting them at position 1 gives the same state.
  good_step(4);
}

TEST_F(EngineDelegateOnDevice, WorkRunsOnTheCallersStreamOrTheHandlesOwn_E1) {
  good_step(3);
  ASSERT_FALSE(fake.enqueue_streams.empty());
  engine::StreamHandle own = fake.enqueue_streams.back();
  EXPECT_NE(own, nullptr);
  EXPECT_NE(own, caller_stream);
  std::vector<TensorView> args = next_args(4);
  ExecuteOptions options;
  options.stream = caller_stream;
  ASSERT_TRUE(handle->execute(args, options).ok());
  history.push_back(4);
  EXPECT_EQ(fake.enqueue_streams.back(), caller_stream);
}

TEST_F(EngineDelegateOnDevice, DeviceResidentIoOnTheCallersStreamReturnsWithoutHostSync_E3) {
  good_step(3);
  store->on_device = {"tokens", "position", "logits"};
  std::vector<TensorView> args = next_args(4);
  fake.register_device_memory(store->buffer("tokens").data(), store->buffer("tokens").size());
  const int waits = fake.host_waits;
  ExecuteOptions options;
  options.stream = caller_stream;
  ASSERT_TRUE(handle->execute(args, options).ok());
  history.push_back(4);
  EXPECT_EQ(fake.host_waits, waits) << "the fast path must not block the host";
  EXPECT_GT(fake.pending(), 0u) << "work is still queued on the caller's stream";
  EXPECT_FALSE(handle->last_stats().host_synchronized);
  EXPECT_EQ(handle->last_stats().total_bytes(), 0);
  ASSERT_TRUE(fake.synchronize(caller_stream).ok());
  EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
  store->on_device.clear();
  good_step(5);
}

TEST_F(EngineDelegateOnDevice, HostOutputOnTheCallersStreamIsDrainedBeforeReturn_E3) {
  std::vector<TensorView> args = next_args(3);
  ExecuteOptions options;
  options.stream = caller_stream;
  ASSERT_TRUE(handle->execute(args, options).ok());
  history.push_back(3);
  EXPECT_TRUE(handle->last_stats().host_synchronized);
  EXPECT_EQ(fake.pending(), 0u);
  EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
}

TEST_F(EngineDelegateOnDevice, FailedCopyAfterEnqueueNeverLeavesWorkUntracked_E2) {
  good_step(3);
  // The staged-out logits copy fails after the engine run was enqueued.
  fake.fail_copies_after_enqueue = 1;
  std::vector<TensorView> args = next_args(4);
  ExecuteOptions options;
  options.stream = caller_stream;
  Status status = handle->execute(args, options);
  EXPECT_EQ(status.code(), ErrorCode::kInternal);
  EXPECT_EQ(fake.pending(), 0u) << "the error path must drain";
  // The run completed at position 1, so the next good step rewrites position 1.
  good_step(4);
  EXPECT_EQ(testing::reconfigured_in_flight(), 0);
}

TEST_F(EngineDelegateOnDevice, FailedReflectCopyOnTheFastPathIsDrained_E2) {
  good_step(3);
  store->on_device = {"tokens", "position", "logits"};
  std::vector<TensorView> args = next_args(4);
  fake.register_device_memory(store->buffer("tokens").data(), store->buffer("tokens").size());
  std::vector<uint8_t> mirror(store->buffer("k_cache.0").size());
  fake.register_device_memory(mirror.data(), mirror.size());
  const size_t k0_out = handle->signature().inputs.size() + 1;
  args[k0_out] = TensorView(mirror.data(), args[2].dtype(), args[2].shape(), Device::cuda(0));
  fake.fail_copies_after_enqueue = 1;
  ExecuteOptions options;
  options.stream = caller_stream;
  EXPECT_FALSE(handle->execute(args, options).ok());
  EXPECT_EQ(fake.pending(), 0u);
  store->on_device.clear();
  good_step(4);
}

TEST_F(EngineDelegateOnDevice, NextExecuteAndDestroyWaitForTheCompletionEvent_E2) {
  store->on_device = {"tokens", "position", "logits"};
  std::vector<TensorView> args = next_args(3);
  fake.register_device_memory(store->buffer("tokens").data(), store->buffer("tokens").size());
  ExecuteOptions options;
  options.stream = caller_stream;
  ASSERT_TRUE(handle->execute(args, options).ok());
  ASSERT_GT(fake.pending(), 0u);
  // The next call must wait before it reconfigures the engine (the fake engine refuses
  // reconfiguration while its run is queued). Its inputs live in fresh device buffers:
  // the queued run still reads the first ones.
  std::vector<int32_t> tokens = {4}, position = {1};
  fake.register_device_memory(tokens.data(), 4);
  fake.register_device_memory(position.data(), 4);
  args[0] = TensorView(tokens.data(), DType::kI32, {1, 1}, Device::cuda(0));
  args[1] = TensorView(position.data(), DType::kI32, {1}, Device::cuda(0));
  ASSERT_TRUE(handle->execute(args, options).ok());
  EXPECT_EQ(testing::reconfigured_in_flight(), 0);
  ASSERT_GT(fake.pending(), 0u);
  handle.reset();  // destroy waits too (checked in TearDown)
  EXPECT_EQ(fake.pending(), 0u);
  history = {3, 4};
  EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
}

// An engine whose launches carry their own pointers is bound for the next call while
// the previous run is still queued: ordered after it on the device, not on the host.
TEST_F(EngineDelegateOnDevice, SnapshottingEngineIsBoundWhileItsLastRunIsQueued_E2) {
  testing::fake_engine_options().snapshot_bindings = true;
  store->on_device = {"tokens", "position", "logits"};
  std::vector<TensorView> args = next_args(3);
  fake.register_device_memory(store->buffer("tokens").data(), store->buffer("tokens").size());
  ExecuteOptions options;
  options.stream = caller_stream;
  ASSERT_TRUE(handle->execute(args, options).ok());
  ASSERT_GT(fake.pending(), 0u);
  std::vector<int32_t> tokens = {4}, position = {1};
  fake.register_device_memory(tokens.data(), 4);
  fake.register_device_memory(position.data(), 4);
  args[0] = TensorView(tokens.data(), DType::kI32, {1, 1}, Device::cuda(0));
  args[1] = TensorView(position.data(), DType::kI32, {1}, Device::cuda(0));
  const int host_waits = fake.host_waits, device_waits = fake.device_waits;
  ASSERT_TRUE(handle->execute(args, options).ok());
  EXPECT_EQ(fake.host_waits, host_waits) << "the second call must not wait on the host";
  EXPECT_EQ(fake.device_waits, device_waits) << "one stream keeps the order by itself";
  EXPECT_EQ(fake.engine_runs_queued, 2);
  // A third call on the handle's own stream is ordered after both, across streams.
  std::vector<int32_t> tokens3 = {5}, position3 = {2};
  fake.register_device_memory(tokens3.data(), 4);
  fake.register_device_memory(position3.data(), 4);
  args[0] = TensorView(tokens3.data(), DType::kI32, {1, 1}, Device::cuda(0));
  args[1] = TensorView(position3.data(), DType::kI32, {1}, Device::cuda(0));
  ASSERT_TRUE(handle->execute(args).ok());  // own stream: drained before it returns
  EXPECT_EQ(fake.device_waits, device_waits + 1) << "another stream waits on the device";
  EXPECT_EQ(fake.pending(), 0u);
  history = {3, 4, 5};
  EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
}

TEST_F(EngineDelegateOnDevice, UnrecordableCompletionEventFallsBackToADrain_E2) {
  store->on_device = {"tokens", "position", "logits"};
  std::vector<TensorView> args = next_args(3);
  fake.register_device_memory(store->buffer("tokens").data(), store->buffer("tokens").size());
  fake.fail_record_event = true;
  ExecuteOptions options;
  options.stream = caller_stream;
  ASSERT_TRUE(handle->execute(args, options).ok());
  EXPECT_EQ(fake.pending(), 0u);
  history.push_back(3);
  EXPECT_LT(max_abs_diff(store->floats("logits"), model.reference_logits(history)), 1e-4);
}

TEST_F(EngineDelegateOnDevice, CallsOnOneHandleFromTwoThreadsNeverOverlap_D6) {
  auto decode = [&] {
    testing::ArgStore own(handle->signature());
    for (auto& [name, bytes] : own.buffers()) {
      fake.register_device_memory(bytes.data(), bytes.size());
    }
    for (int32_t p = 0; p < 5; ++p) {
      own.set_tokens({static_cast<int32_t>(3 + p)}, p);
      std::vector<TensorView> args = own.views(Device::cuda(0));
      ASSERT_TRUE(handle->execute(args).ok());
    }
    EXPECT_LT(max_abs_diff(own.floats("logits"), model.reference_logits({3, 4, 5, 6, 7})), 1e-4);
  };
  std::thread a(decode), b(decode);
  a.join();
  b.join();
  EXPECT_EQ(testing::concurrent_engine_calls(), 0);
}

}  // namespace
}  // namespace kvrt::delegate
