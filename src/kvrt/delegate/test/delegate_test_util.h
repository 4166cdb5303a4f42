// Helpers for the engine delegate tests: blobs made from tiny subgraphs the way
// lowering makes them, and argument storage bound by binding name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/format/blob.h"
#include "kvrt/graph/graph.h"

namespace kvrt::delegate::testing {

struct BlobParts {
  format::BlobMetadata metadata;
  std::string payload;  // graph JSON
};

// Inputs = graph.inputs; outputs = graph.outputs then each mutation's result; one
// kv_cache_update alias per mutation (result -> buffer).
BlobParts blob_parts(const graph::Graph& subgraph);
Result<std::vector<std::byte>> write(const BlobParts& parts);
// Replaces the first occurrence of `from` in the blob's bytes by `to` (same length):
// for blobs that write_blob would refuse to produce.
bool patch(std::vector<std::byte>& blob, std::string_view from, std::string_view to);

// Host buffers for every binding of a signature, one per name. An output aliased to
// an input shares that input's buffer, so views() passes one storage twice (D3).
class ArgStore {
 public:
  explicit ArgStore(const format::BlobMetadata& signature, Shape tokens_shape = {1, 1});
  // The views in argument order. Aliased inputs and outputs and the bindings named in
  // `on_device` are labelled `device`; everything else is host memory.
  std::vector<TensorView> views(Device device = Device::cpu()) const;
  std::vector<uint8_t>& buffer(const std::string& name) { return buffers_.at(storage_of(name)); }
  const std::vector<uint8_t>& buffer(const std::string& name) const {
    return buffers_.at(storage_of(name));
  }
  std::vector<float> floats(const std::string& name) const;
  void set_tokens(std::vector<int32_t> tokens, int32_t position);
  std::vector<std::string> on_device;
  // Every buffer (for registering as fake device memory).
  std::map<std::string, std::vector<uint8_t>>& buffers() { return buffers_; }

 private:
  std::string storage_of(const std::string& name) const;
  const format::BlobMetadata& signature_;
  std::map<std::string, std::vector<uint8_t>> buffers_;
  std::map<std::string, std::string> alias_;  // output -> input
  std::map<std::string, Shape> shapes_;
};

}  // namespace kvrt::delegate::testing
