// Engine targets: how the engine delegate finds, for a device type, the builder of an
// engine and the DeviceApi that drives it. The CPU target is built in (see
// delegate/engine_delegate.cpp); a CUDA target registers itself with
// register_engine_target() before programs are loaded, and tests register fakes.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "kvrt/engine/common/device_api.h"
#include "kvrt/engine/common/engine.h"

namespace kvrt::engine {

struct EngineTarget {
  std::string name;  // "cpu", "cuda", ... for messages
  DeviceType device_type = DeviceType::kCpu;
  // Builds an engine from a partition payload for options.device.
  std::function<Result<std::unique_ptr<Engine>>(std::span<const std::byte> payload,
                                                const WeightProvider& weights,
                                                const EngineOptions& options)>
      build;
  // The DeviceApi of one device of this type; the pointer outlives every engine.
  std::function<Result<DeviceApi*>(int device_index)> device_api;
};

// Installs `target` for its device type, replacing any previous one. Thread-safe.
Status register_engine_target(EngineTarget target);
// Removes the target of `type` (tests restore the registry with it).
void unregister_engine_target(DeviceType type);
// A copy of the target for `type`, or NotFound naming the device type.
Result<EngineTarget> find_engine_target(DeviceType type);

}  // namespace kvrt::engine
