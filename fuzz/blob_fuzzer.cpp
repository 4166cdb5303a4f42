// libFuzzer target for the delegate blob reader (A4): no input may crash, hang or
// trip a sanitizer. Beyond that, two properties are checked on every input:
// - a refusal is InvalidProgram with a one-line message;
// - a blob the reader accepts is one the writer reproduces exactly (write, re-read,
//   compare), so reader and writer never disagree on what is valid.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "kvrt/format/blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvrt;
  using namespace kvrt::format;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto blob = read_blob(bytes);
  if (!blob.ok()) {
    const std::string& message = blob.status().message();
    if (blob.status().code() != ErrorCode::kInvalidProgram) __builtin_trap();
    if (message.empty() || message.find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  auto rewritten = write_blob(blob->metadata, blob->payload);
  if (!rewritten.ok()) __builtin_trap();
  auto again = read_blob(*rewritten);
  if (!again.ok()) __builtin_trap();
  if (!(again->metadata == blob->metadata)) __builtin_trap();
  if (again->required_features != blob->required_features) __builtin_trap();
  if (again->payload.size() != blob->payload.size()) __builtin_trap();
  if (!blob->payload.empty() &&
      std::memcmp(again->payload.data(), blob->payload.data(), blob->payload.size()) != 0) {
    __builtin_trap();
  }
  return 0;
}
