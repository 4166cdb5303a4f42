// The engine delegate: the backend named "engine". Its blob carries a partition's
// subgraph as payload; init builds an engine for the requested device and checks the
// blob against the engine (C1-C4); execute binds the caller's tensors and runs it
// (D1-D6, E1-E3). The code: engine_delegate_init.cpp (init), engine_delegate.cpp
// (execute). Design notes: docs/delegate.md.
#pragma once

#include <memory>

#include "kvrt/delegate/backend.h"
#include "kvrt/engine/common/device_api.h"

namespace kvrt::delegate {

inline constexpr std::string_view kEngineBackendName = "engine";

std::shared_ptr<const Backend> make_engine_backend();

// The DeviceApi of the engine target for `device` (the CPU target is built in): what
// the runtime allocates arenas and buffers with, so they live where the engine runs.
Result<engine::DeviceApi*> device_api_for(Device device);

}  // namespace kvrt::delegate
