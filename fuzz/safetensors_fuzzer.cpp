// libFuzzer target for the safetensors reader: a file it accepts has every tensor
// inside the file, with nbytes = numel * dtype size, and a view of each can be taken
// and read end to end.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "kvrt/frontend/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvrt;
  fuzz::MemoryFile file(data, size);
  auto st = frontend::SafetensorsFile::open(file.path());
  if (!st.ok()) {
    fuzz::check_refusal(st.status());
    return 0;
  }
  volatile uint8_t sink = 0;
  for (const frontend::TensorRecord& record : st->tensors()) {
    if (record.offset > size || record.nbytes > size - record.offset) __builtin_trap();
    const auto bytes = st->bytes(record);
    if (bytes.size() != record.nbytes) __builtin_trap();
    if (!bytes.empty())
      sink = sink + static_cast<uint8_t>(bytes.front()) + static_cast<uint8_t>(bytes.back());
    auto view = st->view(record);
    if (!view.ok()) fuzz::check_refusal(view.status());
  }
  (void)sink;
  return 0;
}
