#include "kvrt/frontend/safetensors_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "kvrt/core/tensor.h"
#include "kvrt/frontend/safetensors.h"

namespace kvrt::frontend {
namespace {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

Result<std::vector<uint64_t>> tensor_sizes(std::span<const TensorToWrite> tensors) {
  std::vector<uint64_t> sizes;
  std::unordered_set<std::string_view> names;
  for (const TensorToWrite& tensor : tensors) {
    if (tensor.name.empty() || tensor.name == "__metadata__") {
      return invalid_argument("write_safetensors: invalid tensor name '", tensor.name, "'");
    }
    if (!names.insert(tensor.name).second) {
      return invalid_argument("write_safetensors: tensor '", tensor.name, "' given twice");
    }
    int64_t bytes = static_cast<int64_t>(dtype_size(tensor.dtype));
    for (int64_t dim : tensor.shape) {
      if (!checked_mul(bytes, dim, &bytes)) {
        return invalid_argument("write_safetensors: tensor '", tensor.name,
                                "' has a negative or overflowing shape");
      }
    }
    sizes.push_back(static_cast<uint64_t>(bytes));
  }
  return sizes;
}

std::string make_header(std::span<const TensorToWrite> tensors, const std::vector<uint64_t>& sizes,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    header[tensors[i].name] = {{"dtype", safetensors_dtype_name(tensors[i].dtype)},
                               {"shape", tensors[i].shape},
                               {"data_offsets", {offset, offset + sizes[i]}}};
    offset += sizes[i];
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

Status write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                         const TensorFill& fill,
                         const std::map<std::string, std::string>& metadata) {
  KVRT_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes, tensor_sizes(tensors));
  const std::string header = make_header(tensors, sizes, metadata);
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) return not_found("cannot create '", path, "': ", std::strerror(errno));
  auto write = [&](const void* data, size_t bytes) -> Status {
    if (bytes != 0 && std::fwrite(data, 1, bytes, file.get()) != bytes) {
      return internal_error("cannot write '", path, "': ", std::strerror(errno));
    }
    return Status();
  };
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  KVRT_RETURN_IF_ERROR(write(length, sizeof(length)));
  KVRT_RETURN_IF_ERROR(write(header.data(), header.size()));
  std::vector<std::byte> buffer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    buffer.assign(sizes[i], std::byte{0});
    Status filled = fill(i, buffer);
    if (!filled.ok()) return filled.with_context("write_safetensors '" + tensors[i].name + "'");
    KVRT_RETURN_IF_ERROR(write(buffer.data(), buffer.size()));
  }
  if (std::fclose(file.release()) != 0) {
    return internal_error("cannot close '", path, "': ", std::strerror(errno));
  }
  return Status();
}

Status write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata) {
  // Check every size before creating the file, so a bad call leaves nothing behind.
  KVRT_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes, tensor_sizes(tensors));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].data.size() != sizes[i]) {
      return invalid_argument("write_safetensors: tensor '", tensors[i].name, "' data holds ",
                              tensors[i].data.size(), " bytes, its shape needs ", sizes[i]);
    }
  }
  return write_safetensors(
      path, tensors,
      [&](size_t index, std::span<std::byte> out) -> Status {
        if (!out.empty()) std::memcpy(out.data(), tensors[index].data.data(), out.size());
        return Status();
      },
      metadata);
}

}  // namespace kvrt::frontend
