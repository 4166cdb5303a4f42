// The engine targets this build has, registered explicitly by the program that uses
// them (the CLI at start-up, Llm::load, tests): the CPU engine always, the CUDA engine
// in builds with the CUDA toolkit. And the meaning of `--device auto`.
#pragma once

#include <string>
#include <string_view>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"

namespace kvrt::engine {

// Registers the built-in targets (idempotent, thread-safe).
Status register_builtin_targets();

// "auto": cuda:0 when the CUDA engine is built and a device that runs its kernels is
// present, else cpu; anything else is parsed ("cpu", "cuda", "cuda:N"). `why` (if
// given) says which was chosen and why, e.g. "cpu (no CUDA device: ...)".
Result<Device> resolve_device(std::string_view name, std::string* why = nullptr);

}  // namespace kvrt::engine
