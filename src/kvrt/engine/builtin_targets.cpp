#include "kvrt/engine/builtin_targets.h"

#include <mutex>

#include "kvrt/engine/common/engine_target.h"
#include "kvrt/engine/cpu/cpu_engine.h"

#if KVRT_HAS_CUDA_ENGINE
#include "kvrt/engine/cuda/cuda_device_api.h"
#include "kvrt/engine/cuda/cuda_engine.h"
#include "kvrt/engine/cuda/kernels.h"
#endif

namespace kvrt::engine {

Status register_builtin_targets() {
  static std::once_flag once;
  static Status status;
  std::call_once(once, [] {
    status = register_engine_target(cpu::cpu_engine_target());
#if KVRT_HAS_CUDA_ENGINE
    if (status.ok()) status = register_engine_target(cuda::cuda_engine_target());
#endif
  });
  return status;
}

Result<Device> resolve_device(std::string_view name, std::string* why) {
  auto say = [why](std::string text) {
    if (why != nullptr) *why = std::move(text);
  };
  if (name != "auto") {
    KVRT_ASSIGN_OR_RETURN(Device device, parse_device(name));
    say(device.to_string() + " (as asked)");
    return device;
  }
#if KVRT_HAS_CUDA_ENGINE
  std::string reason;
  if (cuda::cuda_device_available(&reason)) {
    const std::string description = cuda::cuda_device_description(0);
    say("cuda:0 (" + (description.empty() ? std::string("CUDA device") : description) + ")");
    return Device::cuda(0);
  }
  say("cpu (" + reason + ")");
#else
  say("cpu (this build has no CUDA engine)");
#endif
  return Device::cpu();
}

}  // namespace kvrt::engine
