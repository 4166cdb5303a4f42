// Program files for the runtime tests: the tiny random Llama lowered and written the
// way `kvrt export` does it, and fixture checkpoints exported on the fly.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/engine/cpu/test/tiny_llama.h"
#include "kvrt/lowering/lowering.h"

namespace kvrt::runtime::testing {

std::string temp_path(const std::string& name);

struct TinyProgramOptions {
  std::set<std::string, std::less<>> force_host;  // node or op names kept on the host
  int64_t max_prompt = 8;
  // Edits the lowered program before it is written (to forge broken programs).
  std::function<Status(lowering::LoweredProgram&)> edit;
};

// Lowers prefill (T in 1..max_prompt) and decode (T = 1) of `model` and writes them to
// temp_path(name). Returns the path.
Result<std::string> write_tiny_program(const kvrt::testing::TinyModel& model,
                                       const std::string& name,
                                       const TinyProgramOptions& options = {});

// Exports the Hugging Face checkpoint in `dir` (frontend -> lowering -> program file)
// to temp_path(name). Returns the path.
Result<std::string> export_checkpoint(const std::string& dir, const std::string& name);

float max_abs_diff(std::span<const float> a, std::span<const float> b);

}  // namespace kvrt::runtime::testing
