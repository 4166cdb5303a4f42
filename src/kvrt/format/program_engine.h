// The standalone engine file (`kvrt export --format engine`): the program container
// (docs/program-format.md) with magic KVRTENGN and no methods: one delegate blob per
// method, each a whole method lowered as a single engine partition, plus the weights
// those blobs use, stored once. It is for running an engine without the program
// executor. The blob's alias list is the only declaration of each cache mutation,
// exactly as inside a program (B5); programs that need host kernels or copies cannot be
// expressed this way and are refused by the exporter.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/format/program.h"

namespace kvrt::format {

inline constexpr char kEngineFileMagic[8] = {'K', 'V', 'R', 'T', 'E', 'N', 'G', 'N'};

struct EngineFileSpec {
  std::vector<std::string> required_features;  // filled by the writer
  std::vector<WeightSpec> weights;             // offsets assigned by the writer
  std::vector<DelegateSpec> delegates;         // one per method, unique method names
  nlohmann::json producer = nlohmann::json::object();
};

struct EngineFileView {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  EngineFileSpec spec;
  std::vector<std::span<const std::byte>> blobs;  // parallel to spec.delegates
  std::span<const std::byte> weight_segment;
};

// Writes atomically like write_program. Every blob must parse; `aliased_io` is required
// exactly when some blob has aliases.
Status write_engine_file(const std::string& path, const EngineFileSpec& spec,
                         std::span<const std::vector<std::byte>> blobs,
                         std::span<const WeightSource> weights,
                         const ProgramWriteOptions& options = {});

// Parses and validates (magic, version, features, segments, weights, blobs).
Result<EngineFileView> read_engine_file(std::span<const std::byte> bytes);

// The JSON metadata as stored.
nlohmann::json engine_file_metadata_json(const EngineFileSpec& spec);

}  // namespace kvrt::format
