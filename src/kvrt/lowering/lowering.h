// Lowering: method graphs in, a program spec plus delegate blobs out. Each engine
// partition becomes one delegate call whose blob carries the partition's subgraph as
// its payload. Argument order, aliasing and buffer placement are decided here and
// asserted here (docs/lowering.md):
//   B1  buffers stay program-owned: a partition gets each cache as an input and returns
//       it as an output aliased to that input;
//   B2  blob input names follow the call's argument order, derived from value identity;
//   B3  blob output names are asserted equal to the call's output-argument order;
//   B4  one output argument per engine output; a cache that is not a registered buffer
//       is refused;
//   F2/F3 buffers used only by the engine live in the device arena (zero copy); a
//       buffer that a host kernel also uses gets explicit copy instructions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/format/blob.h"
#include "kvrt/format/program.h"
#include "kvrt/graph/graph.h"
#include "kvrt/partition/partitioner.h"

namespace kvrt::lowering {

struct MethodGraph {
  std::string name;                     // "prefill", "decode"
  const graph::Graph* graph = nullptr;  // must outlive lower_program
};

struct LoweringOptions {
  partition::PartitionOptions partition;
  std::string target_device = "any";  // written into every blob ("cpu", "cuda", "any")
  nlohmann::json producer = nlohmann::json::object();
};

// Where each delegate came from (for inspect-style summaries and tests).
struct PartitionInfo {
  std::string method;
  size_t delegate = 0;    // index into spec.delegates
  size_t first_node = 0;  // node range in the method graph
  size_t node_count = 0;
};

struct LoweredProgram {
  format::ProgramSpec spec;                   // weight offsets are assigned by write_program
  std::vector<std::vector<std::byte>> blobs;  // parallel to spec.delegates
  std::vector<PartitionInfo> partitions;      // parallel to spec.delegates
};

// Lowers every method. Buffers are shared by name (their dtype and shape must agree
// across methods), weights are listed once. Errors: InvalidProgram for an invalid
// graph or a cache that is a method input rather than a buffer (B4); NotSupported for
// unknown ops or outputs lowering cannot place; InvalidArgument for force_host names
// that match nothing in any method; Internal when an ordering assertion (B2/B3/B4)
// fails, which is a lowering bug and never produces a program.
Result<LoweredProgram> lower_program(std::span<const MethodGraph> methods,
                                     const LoweringOptions& options);

// The B2/B3 assertion: binding i of `blob` (inputs, then outputs) must be named
// arg_names[i], where arg_names are the names of the delegate call's argument values
// in argument order. Fails with Internal naming the first mismatch.
Status check_binding_order(std::span<const std::string> arg_names, size_t num_inputs,
                           const format::BlobMetadata& blob);

}  // namespace kvrt::lowering
