// Lowers the tiny hand-built Llama (prefill + decode) for lowering tests, and helpers
// to look at the result the way the runtime will: through the written file.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kvrt/format/blob.h"
#include "kvrt/format/program.h"
#include "kvrt/lowering/lowering.h"
#include "kvrt/partition/test/tiny_llama_graph.h"

namespace kvrt::lowering::testing {

struct TinyProgram {
  graph::Graph prefill;
  graph::Graph decode;
  Result<LoweredProgram> lowered = internal_error("not lowered");
};

inline TinyProgram lower_tiny(std::set<std::string, std::less<>> force_host = {},
                              const kvrt::testing::TinyLlama& config = {}) {
  TinyProgram program;
  program.prefill = kvrt::testing::tiny_llama_graph(config, /*prefill=*/true);
  program.decode = kvrt::testing::tiny_llama_graph(config, /*prefill=*/false);
  const MethodGraph methods[] = {{"prefill", &program.prefill}, {"decode", &program.decode}};
  LoweringOptions options;
  options.partition.force_host = std::move(force_host);
  options.producer = {{"tool", "lowering_test"}};
  program.lowered = lower_program(methods, options);
  return program;
}

// Zero-filled weights: enough for format-level tests.
inline std::vector<format::WeightFiller> zero_fillers(const format::ProgramSpec& spec) {
  std::vector<format::WeightFiller> fillers;
  for (size_t i = 0; i < spec.weights.size(); ++i) {
    fillers.push_back([](std::span<std::byte> out) {
      std::fill(out.begin(), out.end(), std::byte{0});
      return Status();
    });
  }
  return fillers;
}

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kvrt_lowering_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// The value names of a delegate call's arguments, in argument order.
inline std::vector<std::string> arg_names(const format::MethodSpec& method,
                                          const format::DelegateCall& call) {
  std::vector<std::string> names;
  for (format::ValueIndex v : call.args)
    names.push_back(method.values[static_cast<size_t>(v)].name);
  return names;
}

inline std::vector<std::string> binding_names(const format::BlobMetadata& metadata) {
  std::vector<std::string> names;
  for (const auto& binding : metadata.inputs) names.push_back(binding.name);
  for (const auto& binding : metadata.outputs) names.push_back(binding.name);
  return names;
}

inline std::vector<const format::DelegateCall*> calls_of(const format::MethodSpec& method) {
  std::vector<const format::DelegateCall*> calls;
  for (const auto& instruction : method.instructions) {
    if (const auto* call = std::get_if<format::DelegateCall>(&instruction)) calls.push_back(call);
  }
  return calls;
}

inline const format::MethodSpec& method_named(const format::ProgramSpec& spec,
                                              std::string_view name) {
  for (const auto& method : spec.methods) {
    if (method.name == name) return method;
  }
  ADD_FAILURE() << "no method " << name;
  return spec.methods.front();
}

}  // namespace kvrt::lowering::testing
