#include "kvrt/delegate/test/delegate_test_util.h"

#include <algorithm>
#include <cstring>

namespace kvrt::delegate::testing {

BlobParts blob_parts(const graph::Graph& g) {
  BlobParts parts;
  auto spec = [&](graph::ValueId id) {
    const graph::Value& v = g.values[static_cast<size_t>(id)];
    return format::BindingSpec{v.name, v.dtype, v.shape};
  };
  for (graph::ValueId id : g.inputs) parts.metadata.inputs.push_back(spec(id));
  for (graph::ValueId id : g.outputs) parts.metadata.outputs.push_back(spec(id));
  for (const graph::BufferMutation& m : g.mutations) {
    parts.metadata.outputs.push_back(spec(m.updated));
    parts.metadata.aliases.push_back({g.values[static_cast<size_t>(m.updated)].name,
                                      g.values[static_cast<size_t>(m.buffer)].name,
                                      format::AliasKind::kKvCacheUpdate});
  }
  parts.payload = graph::to_json(g).dump();
  return parts;
}

Result<std::vector<std::byte>> write(const BlobParts& parts) {
  return format::write_blob(parts.metadata, std::as_bytes(std::span(parts.payload)));
}

bool patch(std::vector<std::byte>& blob, std::string_view from, std::string_view to) {
  if (from.size() != to.size()) return false;
  std::string_view text(reinterpret_cast<const char*>(blob.data()), blob.size());
  const size_t at = text.find(from);
  if (at == std::string_view::npos) return false;
  std::memcpy(blob.data() + at, to.data(), to.size());
  return true;
}

ArgStore::ArgStore(const format::BlobMetadata& signature, Shape tokens_shape)
    : signature_(signature) {
  for (const format::AliasSpec& alias : signature.aliases) alias_[alias.output] = alias.input;
  auto add = [&](const format::BindingSpec& b) {
    std::vector<int64_t> dims;
    for (const graph::Dim& d : b.shape) dims.push_back(d.is_dynamic() ? d.max : d.size);
    Shape shape = *Shape::from_span(dims);
    if (b.name == "tokens") shape = tokens_shape;
    shapes_[b.name] = shape;
    if (alias_.count(b.name)) return;
    buffers_[b.name].assign(static_cast<size_t>(*shape.numel()) * dtype_size(b.dtype), 0);
  };
  for (const auto& b : signature.inputs) add(b);
  for (const auto& b : signature.outputs) add(b);
}

std::string ArgStore::storage_of(const std::string& name) const {
  auto it = alias_.find(name);
  return it == alias_.end() ? name : it->second;
}

std::vector<TensorView> ArgStore::views(Device device) const {
  std::vector<TensorView> views;
  auto add = [&](const format::BindingSpec& b) {
    const std::string storage = storage_of(b.name);
    bool aliased = storage != b.name;
    for (const auto& [out, in] : alias_) aliased = aliased || in == b.name;
    const bool listed = std::find(on_device.begin(), on_device.end(), b.name) != on_device.end();
    const auto& bytes = buffers_.at(storage);
    views.emplace_back(const_cast<uint8_t*>(bytes.data()), b.dtype, shapes_.at(b.name),
                       aliased || listed ? device : Device::cpu());
  };
  for (const auto& b : signature_.inputs) add(b);
  for (const auto& b : signature_.outputs) add(b);
  return views;
}

std::vector<float> ArgStore::floats(const std::string& name) const {
  const auto& bytes = buffer(name);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

void ArgStore::set_tokens(std::vector<int32_t> tokens, int32_t position) {
  shapes_["tokens"] = {1, static_cast<int64_t>(tokens.size())};
  buffers_["tokens"].resize(tokens.size() * sizeof(int32_t));
  std::memcpy(buffers_["tokens"].data(), tokens.data(), tokens.size() * sizeof(int32_t));
  std::memcpy(buffers_["position"].data(), &position, sizeof(position));
}

}  // namespace kvrt::delegate::testing
