// What `kvrt inspect` shows for a program or engine file: methods and instructions,
// each delegate's bindings in argument order with their storage, aliases, buffers and
// where they live, weight bytes, and the bytes each buffer costs per step in copies
// (0 when it is bound in place, F2/F3). JSON first; the text report renders the JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "kvrt/core/result.h"
#include "kvrt/format/program.h"
#include "kvrt/format/program_engine.h"

namespace kvrt::exporter {

// True when `bytes` starts with the program or engine file magic.
bool is_program_file(std::span<const std::byte> bytes);
bool is_engine_file(std::span<const std::byte> bytes);

nlohmann::json describe_program(const format::ProgramView& program);
nlohmann::json describe_engine_file(const format::EngineFileView& engine);

// Human-readable rendering of describe_program / describe_engine_file output.
std::string render_description(const nlohmann::json& description);

// Parses (fully validated) and describes the bytes of a program / engine file; `json`
// selects the JSON form (pretty-printed) instead of the text report.
Result<std::string> inspect_program_bytes(std::span<const std::byte> bytes, bool json);
Result<std::string> inspect_engine_bytes(std::span<const std::byte> bytes, bool json);

// Maps a program or engine file (chosen by magic) and describes it.
Result<std::string> inspect_file(const std::string& path, bool json);

}  // namespace kvrt::exporter
