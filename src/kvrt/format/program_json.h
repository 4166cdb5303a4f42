// Internal to the program format: the metadata JSON <-> ProgramSpec conversion and the
// semantic validation shared by the writer and the reader.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/format/program.h"

namespace kvrt::format::detail {

// Sizes beyond this (256 TiB) are refused by the reader as implausible: no machine
// holds them, and arithmetic on them could wrap.
inline constexpr uint64_t kMaxPlausibleBytes = uint64_t{1} << 48;

// Parses the metadata JSON. Types, names and ranges are checked here; references
// between entries are checked by validate_program_spec. Errors name the field.
// `strict`: refuse unknown keys (a file of this reader's minor version or older).
Result<ProgramSpec> program_spec_from_json(const nlohmann::json& json, bool strict);

// The weight and delegate tables (shared with the engine file).
nlohmann::json weights_to_json(const std::vector<WeightSpec>& weights);
nlohmann::json delegates_to_json(const std::vector<DelegateSpec>& delegates);
Result<std::vector<WeightSpec>> weights_from_json(const nlohmann::json& root, bool strict);
Result<std::vector<DelegateSpec>> delegates_from_json(const nlohmann::json& root, bool strict);

// The required features a spec needs (`aliased_io` when some delegate output is stored
// in a buffer).
std::vector<std::string> program_features_needed(const ProgramSpec& spec);

// Everything that makes a program executable and unambiguous: unique names, every
// index and reference, storage consistency, def-before-use, planned ranges and
// lifetimes, delegate arguments against the blob bindings and aliases (`blobs` are the
// blob bytes parallel to spec.delegates), copy_bytes_per_step, mutations once (B5).
// `weight_segment_size` bounds weight offsets (pass UINT64_MAX before they are
// assigned).
Status validate_program_spec(const ProgramSpec& spec,
                             std::span<const std::span<const std::byte>> blobs,
                             uint64_t weight_segment_size);

// Weight table checks shared with the engine file: unique names, nbytes equal to shape
// x dtype size, 64-aligned offsets inside the segment, no overlap.
Status validate_weights(const std::vector<WeightSpec>& weights, uint64_t segment_size);

Result<uint64_t> static_nbytes(DType dtype, std::span<const int64_t> shape);

inline uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace kvrt::format::detail
