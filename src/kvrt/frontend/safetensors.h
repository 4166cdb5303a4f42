// Reader for the safetensors format: an 8-byte little-endian header length N, a JSON
// header of N bytes, then the tensor bytes. Each header entry is
// {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to the first
// byte after the header; an optional "__metadata__" maps strings to strings.
// The file is memory-mapped and never read into memory: tensor views point into the
// mapping, which lives as long as the SafetensorsFile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/mapped_file.h"
#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"

namespace kvrt::frontend {

// One tensor of a safetensors file, as the header describes it.
struct TensorRecord {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the file (header already added)
  uint64_t nbytes = 0;  // element count * dtype size
};

// "F32", "F16", "BF16", "I32", "I64", "U8", "BOOL". Other safetensors dtypes (F64, I8,
// F8_E4M3, ...) are NotSupported; anything else InvalidArgument.
Result<DType> parse_safetensors_dtype(std::string_view name);
std::string_view safetensors_dtype_name(DType dtype);

class SafetensorsFile {
 public:
  // Maps and validates `path`. Errors name the file and, where one is at fault, the
  // tensor: short file, header length beyond the file, bad JSON, duplicate names,
  // unknown dtype, negative or overflowing shapes, offsets out of range, reversed,
  // overlapping or not matching dtype * shape. Gaps between tensors are allowed.
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Sorted by name.
  const std::vector<TensorRecord>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when absent.
  const TensorRecord* find(std::string_view name) const;
  // The tensor's bytes inside the mapping (valid while this object lives).
  std::span<const std::byte> bytes(const TensorRecord& record) const;
  // A contiguous read-only CPU view (the mapping is PROT_READ: never write through it).
  // Errors: NotFound for an unknown name, InvalidArgument for rank above 6.
  Result<TensorView> view(std::string_view name) const;
  Result<TensorView> view(const TensorRecord& record) const;

 private:
  MappedFile file_;
  std::vector<TensorRecord> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kvrt::frontend
