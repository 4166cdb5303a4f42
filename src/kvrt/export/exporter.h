// `kvrt export`: checkpoint directory in, one artifact out. The pipeline is
// frontend (graphs for prefill and decode) -> partition -> lowering -> format writer,
// with weights streamed from the mapped safetensors into the mapped output file and
// converted on the way. Every failure is a one-line Status naming the file, tensor or
// option; the output path is never left half-written.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "kvrt/core/dtype.h"
#include "kvrt/core/result.h"
#include "kvrt/frontend/checkpoint.h"
#include "kvrt/lowering/lowering.h"

namespace kvrt::exporter {

enum class ExportFormat : uint8_t {
  kProgram,    // the program file (docs/program-format.md)
  kEngine,     // standalone engine file: one blob per method + weights (KVRTENGN)
  kGraphJson,  // {"format": "kvrt-graphs", "methods": {name: graph JSON}}, no weights
};
// "program", "engine", "graph-json".
std::string_view export_format_name(ExportFormat format);
Result<ExportFormat> parse_export_format(std::string_view name);

struct ExportOptions {
  std::string checkpoint_dir;
  std::string output_path;
  std::optional<DType> weight_dtype;  // f32, f16 or bf16; unset keeps the stored dtype
  DType cache_dtype = DType::kF32;
  int64_t max_seq = 0;     // 0: the frontend's default
  int64_t max_prompt = 0;  // 0: max_seq
  std::set<std::string, std::less<>> force_host;
  ExportFormat format = ExportFormat::kProgram;
  std::string target_device = "any";
  // Weight bytes written so far and in total; called after every weight.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct ExportSummary {
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;
  size_t weights = 0;
  size_t delegates = 0;
  size_t methods = 0;
};

Result<ExportSummary> export_checkpoint(const ExportOptions& options);

// InvalidArgument naming the output and its directory when
// the file system holding output_path has fewer than `needed` bytes free. export
// checks this before it writes any weight.
Status check_free_space(const std::string& output_path, uint64_t needed);

// The two method graphs of a checkpoint, with floating parameters retyped to
// options.weight_dtype when set (so engines see the dtype actually stored).
struct MethodGraphs {
  graph::Graph prefill;
  graph::Graph decode;
};
Result<MethodGraphs> build_method_graphs(const frontend::Checkpoint& checkpoint,
                                         const ExportOptions& options);

// The graph-json artifact: both graphs, each declaring its mutations once (B5).
nlohmann::json graphs_json(const MethodGraphs& graphs);

}  // namespace kvrt::exporter
