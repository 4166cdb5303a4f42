#include <gtest/gtest.h>

#include <vector>

#include "kvrt/engine/common/device_api.h"
#include "kvrt/engine/common/engine_target.h"

namespace kvrt::engine {
namespace {

// A DeviceApi that only tracks the current device, to test the guard.
class SwitchingApi final : public DeviceApi {
 public:
  Device current = Device::cuda(3);
  bool fail_read = false;
  Device device() const override { return Device::cuda(0); }
  Result<Device> current_device() const override {
    if (fail_read) return internal_error("no driver");
    return current;
  }
  Status set_current_device(Device device) override {
    current = device;
    return Status();
  }
  bool is_engine_accessible(const TensorView&) const override { return false; }
  Result<void*> allocate(size_t) override { return not_supported("x"); }
  void free(void*) override {}
  Status fill_zero(void*, size_t) override { return Status(); }
  Result<StreamHandle> create_stream() override { return StreamHandle{nullptr}; }
  void destroy_stream(StreamHandle) override {}
  Status copy_async(void*, const void*, size_t, StreamHandle) override { return Status(); }
  Result<EventHandle> record_event(StreamHandle) override { return EventHandle{nullptr}; }
  Status wait_event(EventHandle) override { return Status(); }
  void destroy_event(EventHandle) override {}
  Status synchronize(StreamHandle) override { return Status(); }
};

TEST(CurrentDeviceGuard, RestoresTheCallersDeviceOnScopeExit_C4) {
  SwitchingApi api;
  {
    CurrentDeviceGuard guard(api);
    ASSERT_TRUE(guard.status().ok());
    ASSERT_TRUE(api.set_current_device(Device::cuda(0)).ok());
  }
  EXPECT_EQ(api.current, Device::cuda(3));
}

TEST(CurrentDeviceGuard, ReportsAnUnreadableDeviceAndRestoresNothing_C4) {
  SwitchingApi api;
  api.fail_read = true;
  {
    CurrentDeviceGuard guard(api);
    EXPECT_FALSE(guard.status().ok());
    api.current = Device::cuda(1);
  }
  EXPECT_EQ(api.current, Device::cuda(1));
}

TEST(HostDeviceApi, CopiesSynchronouslyAndAcceptsOnlyHostViews) {
  DeviceApi& api = host_device_api();
  std::vector<float> a = {1, 2, 3}, b(3);
  ASSERT_TRUE(api.copy_async(b.data(), a.data(), sizeof(float) * 3, nullptr).ok());
  EXPECT_EQ(a, b);
  EXPECT_TRUE(api.is_engine_accessible(TensorView(a.data(), DType::kF32, {3})));
  EXPECT_FALSE(api.is_engine_accessible(TensorView(a.data(), DType::kF32, {3}, Device::cuda(0))));
  EXPECT_FALSE(api.set_current_device(Device::cuda(0)).ok());
}

// The host writes at once; a device API without stream writes says NotSupported (its
// callers then copy from pinned memory) and leaves the destination alone.
TEST(DeviceApi, ValueWritesAreImmediateOnTheHostAndOptionalElsewhere) {
  int32_t value = 7;
  ASSERT_TRUE(host_device_api().write_i32_async(&value, 42, nullptr).ok());
  EXPECT_EQ(value, 42);
  SwitchingApi device;
  EXPECT_EQ(device.write_i32_async(&value, 9, nullptr).code(), ErrorCode::kNotSupported);
  EXPECT_EQ(value, 42);
}

TEST(EngineTargetRegistry, RegisterReplacesAndUnregisterRemoves) {
  EngineTarget target;
  target.name = "fake";
  target.device_type = DeviceType::kCuda;
  target.build = [](std::span<const std::byte>, const WeightProvider&,
                    const EngineOptions&) -> Result<std::unique_ptr<Engine>> {
    return not_supported("fake");
  };
  target.device_api = [](int) -> Result<DeviceApi*> { return &host_device_api(); };
  ASSERT_TRUE(register_engine_target(target).ok());
  target.name = "fake2";
  ASSERT_TRUE(register_engine_target(target).ok());
  Result<EngineTarget> found = find_engine_target(DeviceType::kCuda);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->name, "fake2");
  unregister_engine_target(DeviceType::kCuda);
  EXPECT_EQ(find_engine_target(DeviceType::kCuda).status().code(), ErrorCode::kNotFound);
}

TEST(EngineTargetRegistry, TargetWithoutBuilderIsRejected) {
  EngineTarget target;
  target.name = "broken";
  EXPECT_EQ(register_engine_target(target).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvrt::engine
