// Internal to the program format: the container shared by the program file
// (`KVRTPROG`) and the standalone engine file (`KVRTENGN`): a 64-byte header, JSON
// metadata, a blob segment and a 4096-aligned weight segment. See
// docs/program-format.md for the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "kvrt/core/result.h"
#include "kvrt/format/program.h"

namespace kvrt::format::detail {

// Required features a container reader understands; any other one is refused.
std::span<const std::string_view> supported_program_features();

struct ContainerLayout {
  uint64_t blobs_size = 0;    // end of the last blob in the blob segment
  uint64_t weights_size = 0;  // end of the last weight in the weight segment
};

struct Container {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  nlohmann::json metadata;
  std::span<const std::byte> blobs;
  std::span<const std::byte> weights;
};

// Writes the container atomically: a temporary file beside `path` (same directory, so
// the rename cannot cross file systems) gets the header, metadata and blobs (at
// `blob_offsets`), then every weight at its offset, written with pwrite straight from
// its source bytes or from a scratch buffer its filler produced; then it is renamed
// over `path`. On failure the temporary file is removed.
Status write_container(const std::string& path, const char (&magic)[8],
                       const nlohmann::json& metadata,
                       std::span<const std::span<const std::byte>> blobs,
                       std::span<const uint64_t> blob_offsets, std::span<const WeightSpec> weights,
                       std::span<const WeightSource> sources, const ContainerLayout& layout,
                       const ProgramWriteOptions& options);

// Checks magic, version, header and segment bounds, parses the metadata JSON (depth
// limited) and refuses unknown required features. `what` names the file kind in errors.
Result<Container> read_container(std::span<const std::byte> bytes, const char (&magic)[8],
                                 std::string_view what);

}  // namespace kvrt::format::detail
