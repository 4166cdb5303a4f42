// All tensors of a checkpoint by name, whether it is one model.safetensors or shards
// listed by model.safetensors.index.json ({"weight_map": {tensor: shard file}}). Owns
// the mapped shard files; views and byte spans stay valid while the index lives.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/core/tensor.h"
#include "kvrt/frontend/safetensors.h"

namespace kvrt::frontend {

// A tensor and where its bytes live. `file` is the shard's path ("" in a shape-only
// index).
struct WeightEntry {
  TensorRecord record;
  std::string file;
  int shard = -1;  // index into the shards; -1 in a shape-only index
};

class WeightIndex {
 public:
  // One safetensors file.
  static Result<WeightIndex> open_file(const std::string& path);
  // A sharded checkpoint: parses the index (errors name it and the field), opens every
  // shard once, and checks both directions: each mapped tensor is in its shard, and
  // each shard tensor is mapped to that shard. Shard names must be plain file names in
  // the index's directory.
  static Result<WeightIndex> open_sharded(const std::string& index_path);
  // `dir`/model.safetensors.index.json when present, else `dir`/model.safetensors.
  static Result<WeightIndex> open_dir(const std::string& dir);
  // Names, dtypes and shapes only, without bytes: lets the graph builder be tested
  // against full-size configurations. view()/bytes() fail (InvalidState) on it.
  static Result<WeightIndex> shape_only(std::vector<TensorRecord> records);

  WeightIndex();
  WeightIndex(WeightIndex&&) noexcept;
  WeightIndex& operator=(WeightIndex&&) noexcept;
  ~WeightIndex();

  // Sorted by name.
  std::span<const WeightEntry> entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  const WeightEntry* find(std::string_view name) const;
  bool has_data() const { return !shape_only_; }
  // A read-only CPU view over the mapping. NotFound for an unknown name.
  Result<TensorView> view(std::string_view name) const;
  Result<std::span<const std::byte>> bytes(std::string_view name) const;
  Result<std::span<const std::byte>> bytes(const WeightEntry& entry) const;
  // Paths of the files the index maps, in shard order.
  std::vector<std::string> files() const;

 private:
  Status add_file(SafetensorsFile file);
  void sort_entries();

  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<WeightEntry> entries_;
  bool shape_only_ = false;
};

}  // namespace kvrt::frontend
