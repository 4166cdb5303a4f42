// Writes safetensors files: for tests that build checkpoints (tiny fixtures, or a
// random 1.1B model streamed tensor by tensor) and for tools. The header is padded
// with spaces to a multiple of 8 bytes so that every tensor starts 8-byte aligned in
// the mapped file when tensor sizes are multiples of 8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"

namespace kvrt::frontend {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;  // dtype_size * numel bytes; unused by the fill overload
};

// Fills `out` (exactly the tensor's byte size) with the data of tensors[index].
using TensorFill = std::function<Status(size_t index, std::span<std::byte> out)>;

// Streams the tensors in the given order, one buffer of the largest tensor at a time.
// Errors: InvalidArgument for an empty or duplicate name, "__metadata__" as a name,
// a negative or overflowing shape; NotFound/Internal for I/O failures (naming `path`).
Status write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                         const TensorFill& fill,
                         const std::map<std::string, std::string>& metadata = {});

// Same, from in-memory data (each `data` span must hold exactly the tensor's bytes).
Status write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace kvrt::frontend
