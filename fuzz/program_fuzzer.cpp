// libFuzzer target for the program file through the whole runtime: the reader, then
// Module::load (buffers, arenas, every delegate's init) and, when it loads, one prefill
// and one decode on the CPU engine. No input may crash, hang, leak or trip a sanitizer;
// every refusal is a one-line Status.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "kvrt/core/log.h"
#include "kvrt/engine/builtin_targets.h"
#include "kvrt/format/program.h"
#include "kvrt/runtime/module.h"

namespace {

// The harness's own budget, not the product's: the reader accepts arenas up to 2^48
// bytes (a real model's cache can be tens of GB), which the fuzzing process must not
// allocate and zero. Inputs above it are read but not loaded.
constexpr uint64_t kMaxLoadBytes = uint64_t{64} << 20;

uint64_t planned_bytes(const kvrt::format::ProgramSpec& spec) {
  uint64_t total = 0;
  auto add = [&total](uint64_t bytes) {
    total = bytes > kMaxLoadBytes || total > kMaxLoadBytes ? kMaxLoadBytes + 1 : total + bytes;
  };
  for (const auto& method : spec.methods) {
    add(method.device_arena_bytes);
    add(method.host_arena_bytes);
  }
  for (const auto& buffer : spec.buffers) {
    uint64_t bytes = kvrt::dtype_size(buffer.dtype);
    for (int64_t dim : buffer.shape) {
      bytes = dim != 0 && bytes > kMaxLoadBytes / static_cast<uint64_t>(dim)
                  ? kMaxLoadBytes + 1
                  : bytes * static_cast<uint64_t>(dim);
    }
    add(bytes);
  }
  return total;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kvrt::set_log_level(kvrt::LogLevel::kOff);
  if (!kvrt::engine::register_builtin_targets().ok()) __builtin_trap();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvrt;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto view = format::read_program(bytes);
  if (!view.ok()) {
    if (view.status().code() != ErrorCode::kInvalidProgram) __builtin_trap();
    fuzz::check_refusal(view.status());
    return 0;
  }
  if (planned_bytes(view->spec) > kMaxLoadBytes) return 0;

  fuzz::MemoryFile file(data, size);
  runtime::ModuleOptions options;
  options.num_threads = 1;
  auto module = runtime::Module::load(file.path(), options);
  if (!module.ok()) {
    fuzz::check_refusal(module.status());
    return 0;
  }
  const int32_t prompt[] = {0, 1};
  auto logits = (*module)->prefill(prompt, 0);
  if (!logits.ok()) {
    fuzz::check_refusal(logits.status());
    return 0;
  }
  auto next = (*module)->decode(1, 2);
  fuzz::check_refusal(next.status());
  return 0;
}
