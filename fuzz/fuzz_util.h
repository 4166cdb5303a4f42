// Shared by the libFuzzer targets: readers that take a path get the input through an
// anonymous in-memory file (no disk, nothing left behind), and every refusal is checked
// to be a one-line message with a logical error code.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvrt/core/status.h"

namespace kvrt::fuzz {

// An in-memory file holding the input; path() names it for readers that open paths.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("kvrt-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) __builtin_trap();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) __builtin_trap();
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

// A refusal of bad input: an input error (never kInternal, which would mean a bug
// below us) with a non-empty one-line message.
inline void check_refusal(const Status& status) {
  if (status.ok()) return;
  if (status.code() == ErrorCode::kInternal) __builtin_trap();
  const std::string& message = status.message();
  if (message.empty() || message.find('\n') != std::string::npos) __builtin_trap();
}

// Splits "A\0B" at its first NUL: two inputs in one (a file and a text to use it on).
inline std::pair<std::string_view, std::string_view> split_at_nul(const uint8_t* data,
                                                                  size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

}  // namespace kvrt::fuzz
