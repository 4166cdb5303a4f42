#include "kvrt/runtime/test/runtime_test_util.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "kvrt/format/program.h"
#include "kvrt/frontend/checkpoint.h"

namespace kvrt::runtime::testing {
namespace {

// Writes `lowered` with weights copied from `bytes_of(name)`.
Status write_lowered(
    const lowering::LoweredProgram& lowered, const std::string& path,
    const std::function<Result<std::span<const std::byte>>(const std::string&)>& bytes_of) {
  std::vector<format::WeightFiller> fillers;
  for (const format::WeightSpec& weight : lowered.spec.weights) {
    const std::string name = weight.name;
    fillers.push_back([name, &bytes_of](std::span<std::byte> out) -> Status {
      KVRT_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, bytes_of(name));
      if (bytes.size() != out.size()) return internal_error("weight '", name, "' size changed");
      std::memcpy(out.data(), bytes.data(), bytes.size());
      return Status();
    });
  }
  return format::write_program(path, lowered.spec, lowered.blobs, fillers);
}

}  // namespace

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kvrt_runtime_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

Result<std::string> write_tiny_program(const kvrt::testing::TinyModel& model,
                                       const std::string& name, const TinyProgramOptions& options) {
  const graph::Graph prefill = model.method_graph(1, options.max_prompt, false);
  const graph::Graph decode = model.method_graph(1, 1, false);
  const lowering::MethodGraph methods[] = {{"prefill", &prefill}, {"decode", &decode}};
  lowering::LoweringOptions lowering_options;
  lowering_options.partition.force_host = options.force_host;
  KVRT_ASSIGN_OR_RETURN(lowering::LoweredProgram lowered,
                        lowering::lower_program(methods, lowering_options));
  if (options.edit) KVRT_RETURN_IF_ERROR(options.edit(lowered));
  const std::string path = temp_path(name);
  KVRT_RETURN_IF_ERROR(write_lowered(lowered, path, [&](const std::string& weight) {
    return Result<std::span<const std::byte>>(
        std::as_bytes(std::span(model.weights.tensors().find(weight)->second.bytes)));
  }));
  return path;
}

Result<std::string> export_checkpoint(const std::string& dir, const std::string& name) {
  KVRT_ASSIGN_OR_RETURN(frontend::Checkpoint checkpoint, frontend::Checkpoint::open(dir));
  frontend::BuildOptions build;
  build.method = frontend::MethodKind::kPrefill;
  build.max_seq = 64;
  build.max_prompt = 16;
  KVRT_ASSIGN_OR_RETURN(graph::Graph prefill, checkpoint.build_graph(build));
  build.method = frontend::MethodKind::kDecode;
  KVRT_ASSIGN_OR_RETURN(graph::Graph decode, checkpoint.build_graph(build));
  const lowering::MethodGraph methods[] = {{"prefill", &prefill}, {"decode", &decode}};
  KVRT_ASSIGN_OR_RETURN(lowering::LoweredProgram lowered,
                        lowering::lower_program(methods, lowering::LoweringOptions{}));
  const std::string path = temp_path(name);
  KVRT_RETURN_IF_ERROR(write_lowered(lowered, path, [&](const std::string& weight) {
    return checkpoint.weights().bytes(weight);
  }));
  return path;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return INFINITY;
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace kvrt::runtime::testing
