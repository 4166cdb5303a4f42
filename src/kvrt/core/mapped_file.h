// Read-only memory mapping of a file: how safetensors checkpoints and program files
// are read without copying their bytes on the host.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "kvrt/core/result.h"

namespace kvrt {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace kvrt
