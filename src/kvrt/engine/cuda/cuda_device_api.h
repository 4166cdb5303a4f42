// The DeviceApi of a CUDA device over the CUDA runtime: which memory a pointer is
// (D2), allocation and pinned staging, streams, events and the current device (C4).
// One instance per device index, created on first use and kept for the process.
#pragma once

#include <string>

#include "kvrt/engine/common/device_api.h"

namespace kvrt::engine::cuda {

enum class MemoryKind {
  kDevice,        // cudaMalloc'd memory of the API's own device
  kOtherDevice,   // device memory of another device
  kManaged,       // cudaMallocManaged (unified) memory
  kPinnedHost,    // page-locked host memory (cudaMallocHost / cudaHostRegister)
  kPageableHost,  // ordinary host memory, unknown to CUDA
};
const char* memory_kind_name(MemoryKind kind);

// What `ptr` is, as seen from device `device_index`.
MemoryKind memory_kind(const void* ptr, int device_index);

// The API of CUDA device `index`; NotFound with the reason when no device that runs
// the kernels (sm_90a) has that index.
Result<DeviceApi*> cuda_device_api(int index);

// "NVIDIA H200 (cuda:0, 132 SMs, 141 GB)" for messages; empty if unreadable.
std::string cuda_device_description(int index);

}  // namespace kvrt::engine::cuda
