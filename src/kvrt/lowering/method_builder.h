// Builds one method of the program from a partitioned graph: its values (with storage),
// its instructions (one delegate call per engine partition, one host kernel per host
// node, copies for the F3 path), its blobs, mutations and memory plan.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/format/program.h"
#include "kvrt/lowering/lowering.h"
#include "kvrt/partition/partitioner.h"

namespace kvrt::lowering {

struct LoweredMethod {
  format::MethodSpec method;
  std::vector<format::DelegateSpec> delegates;  // called with indices delegate_base + i
  std::vector<std::vector<std::byte>> blobs;    // parallel to delegates
  std::vector<PartitionInfo> partitions;        // parallel to delegates
};

// `buffer_arenas` gives the program-wide arena of every buffer the graph uses.
Result<LoweredMethod> lower_method(const MethodGraph& method, const partition::PartitionPlan& plan,
                                   const std::map<std::string, format::Arena>& buffer_arenas,
                                   size_t delegate_base, const LoweringOptions& options);

}  // namespace kvrt::lowering
