#include "kvrt/frontend/weight_index.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "kvrt/frontend/json_fields.h"

namespace kvrt::frontend {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kShardIndex = "model.safetensors.index.json";

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

// weight_map as tensor -> shard file name, checked.
Result<std::map<std::string, std::string>> read_weight_map(const std::string& index_path) {
  KVRT_ASSIGN_OR_RETURN(nlohmann::json index, read_json_file(index_path));
  if (!index.is_object()) return invalid_argument(index_path, ": expected a JSON object");
  JsonFields fields(index, index_path);
  const nlohmann::json* map = fields.get("weight_map");
  if (map == nullptr) return fields.error("weight_map", "missing");
  if (!map->is_object()) return fields.error("weight_map", "expected an object");
  if (map->empty()) return fields.error("weight_map", "lists no tensors");
  std::map<std::string, std::string> out;
  for (const auto& [tensor, file] : map->items()) {
    JsonFields entry(*map, index_path, "weight_map");
    if (!file.is_string()) return entry.error(tensor, "expected a shard file name");
    std::string name = file.get<std::string>();
    if (!is_plain_file_name(name)) {
      return entry.error(tensor, "shard '" + name + "' must be a file name in the index's folder");
    }
    out.emplace(tensor, std::move(name));
  }
  return out;
}

}  // namespace

WeightIndex::WeightIndex() = default;
WeightIndex::WeightIndex(WeightIndex&&) noexcept = default;
WeightIndex& WeightIndex::operator=(WeightIndex&&) noexcept = default;
WeightIndex::~WeightIndex() = default;

Status WeightIndex::add_file(SafetensorsFile file) {
  const int shard = static_cast<int>(shards_.size());
  for (const TensorRecord& record : file.tensors()) {  // entries_ is sorted here
    if (const WeightEntry* existing = find(record.name)) {
      return invalid_argument("tensor '", record.name, "' is in both '", existing->file, "' and '",
                              file.path(), "'");
    }
  }
  for (const TensorRecord& record : file.tensors()) {
    entries_.push_back({record, file.path(), shard});
  }
  shards_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
  sort_entries();
  return Status();
}

void WeightIndex::sort_entries() {
  std::sort(entries_.begin(), entries_.end(), [](const WeightEntry& a, const WeightEntry& b) {
    return a.record.name < b.record.name;
  });
}

Result<WeightIndex> WeightIndex::open_file(const std::string& path) {
  KVRT_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  WeightIndex index;
  KVRT_RETURN_IF_ERROR(index.add_file(std::move(file)));
  return index;
}

Result<WeightIndex> WeightIndex::open_sharded(const std::string& index_path) {
  KVRT_ASSIGN_OR_RETURN(auto weight_map, read_weight_map(index_path));
  std::map<std::string, int> shard_of_file;  // sorted, so shard order is deterministic
  for (const auto& [tensor, file] : weight_map) shard_of_file.emplace(file, 0);
  const fs::path dir = fs::path(index_path).parent_path();
  WeightIndex index;
  for (auto& [file, shard] : shard_of_file) {
    auto opened = SafetensorsFile::open((dir / file).string());
    if (!opened.ok()) return opened.status().with_context(index_path + ": shard '" + file + "'");
    shard = static_cast<int>(index.shards_.size());
    for (const TensorRecord& record : opened->tensors()) {
      auto mapped = weight_map.find(record.name);
      if (mapped == weight_map.end()) {
        return invalid_argument(index_path, ": shard '", file, "' holds tensor '", record.name,
                                "', which weight_map does not list");
      }
      if (mapped->second != file) {
        return invalid_argument(index_path, ": shard '", file, "' holds tensor '", record.name,
                                "', which weight_map puts in '", mapped->second, "'");
      }
    }
    KVRT_RETURN_IF_ERROR(index.add_file(std::move(opened).value()));
  }
  for (const auto& [tensor, file] : weight_map) {
    if (index.find(tensor) == nullptr) {
      return not_found(index_path, ": weight_map puts tensor '", tensor, "' in '", file,
                       "', which does not hold it");
    }
  }
  return index;
}

Result<WeightIndex> WeightIndex::open_dir(const std::string& dir) {
  const fs::path sharded = fs::path(dir) / kShardIndex;
  std::error_code error;
  if (fs::exists(sharded, error)) return open_sharded(sharded.string());
  const fs::path single = fs::path(dir) / kSingleFile;
  if (fs::exists(single, error)) return open_file(single.string());
  return not_found(dir, ": no ", kSingleFile, " or ", kShardIndex);
}

Result<WeightIndex> WeightIndex::shape_only(std::vector<TensorRecord> records) {
  WeightIndex index;
  index.shape_only_ = true;
  for (TensorRecord& record : records) index.entries_.push_back({std::move(record), "", -1});
  index.sort_entries();
  for (size_t i = 1; i < index.entries_.size(); ++i) {
    if (index.entries_[i].record.name == index.entries_[i - 1].record.name) {
      return invalid_argument("tensor '", index.entries_[i].record.name, "' is listed twice");
    }
  }
  return index;
}

const WeightEntry* WeightIndex::find(std::string_view name) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), name,
      [](const WeightEntry& entry, std::string_view n) { return entry.record.name < n; });
  return it != entries_.end() && it->record.name == name ? &*it : nullptr;
}

Result<TensorView> WeightIndex::view(std::string_view name) const {
  const WeightEntry* entry = find(name);
  if (entry == nullptr) return not_found("no tensor '", name, "' in the checkpoint");
  if (entry->shard < 0) return invalid_state("tensor '", name, "' has no data (shape-only index)");
  return shards_[static_cast<size_t>(entry->shard)]->view(entry->record);
}

Result<std::span<const std::byte>> WeightIndex::bytes(std::string_view name) const {
  const WeightEntry* entry = find(name);
  if (entry == nullptr) return not_found("no tensor '", name, "' in the checkpoint");
  return bytes(*entry);
}

Result<std::span<const std::byte>> WeightIndex::bytes(const WeightEntry& entry) const {
  if (entry.shard < 0 || static_cast<size_t>(entry.shard) >= shards_.size()) {
    return invalid_state("tensor '", entry.record.name, "' has no data (shape-only index)");
  }
  return shards_[static_cast<size_t>(entry.shard)]->bytes(entry.record);
}

std::vector<std::string> WeightIndex::files() const {
  std::vector<std::string> out;
  for (const auto& shard : shards_) out.push_back(shard->path());
  return out;
}

}  // namespace kvrt::frontend
