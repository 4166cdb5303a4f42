#include "kvrt/format/program_engine.h"

#include <algorithm>
#include <set>

#include "kvrt/format/blob.h"
#include "kvrt/format/program_container.h"
#include "kvrt/format/program_json.h"

namespace kvrt::format {
namespace {

// Blob checks shared by writer and reader: each parses, methods are unique, and the
// file-level `aliased_io` feature matches the blobs.
Status validate_engine_spec(const EngineFileSpec& spec,
                            std::span<const std::span<const std::byte>> blobs,
                            uint64_t weight_segment_size) {
  KVRT_RETURN_IF_ERROR(detail::validate_weights(spec.weights, weight_segment_size));
  if (blobs.size() != spec.delegates.size()) {
    return invalid_program("engine file: blob count differs from delegate count");
  }
  std::set<std::string> methods;
  bool aliased = false;
  for (size_t i = 0; i < spec.delegates.size(); ++i) {
    const std::string path = "engine file: delegates[" + std::to_string(i) + "]";
    if (spec.delegates[i].method.empty() || !methods.insert(spec.delegates[i].method).second) {
      return invalid_program(path, ".method: empty or duplicate '", spec.delegates[i].method, "'");
    }
    auto blob = read_blob(blobs[i]);
    if (!blob.ok()) return blob.status().with_context(path);
    aliased = aliased || !blob->metadata.aliases.empty();
  }
  const bool declared = std::find(spec.required_features.begin(), spec.required_features.end(),
                                  kProgramFeatureAliasedIo) != spec.required_features.end();
  if (aliased != declared) {
    return invalid_program(
        "engine file: required_features: 'aliased_io' must be listed exactly "
        "when a blob has aliases");
  }
  return Status();
}

}  // namespace

nlohmann::json engine_file_metadata_json(const EngineFileSpec& spec) {
  return {{"format", "kvrt-engine"},
          {"required_features", spec.required_features},
          {"producer", spec.producer},
          {"weights", detail::weights_to_json(spec.weights)},
          {"delegates", detail::delegates_to_json(spec.delegates)}};
}

Status write_engine_file(const std::string& path, const EngineFileSpec& input_spec,
                         std::span<const std::vector<std::byte>> blobs,
                         std::span<const WeightSource> weights,
                         const ProgramWriteOptions& options) {
  if (blobs.size() != input_spec.delegates.size() || weights.size() != input_spec.weights.size()) {
    return invalid_argument("write_engine_file: blobs/weights do not match the spec");
  }
  EngineFileSpec spec = input_spec;
  detail::ContainerLayout layout;
  std::vector<uint64_t> blob_offsets;
  bool aliased = false;
  for (size_t i = 0; i < blobs.size(); ++i) {
    layout.blobs_size = detail::align_up(layout.blobs_size, kBlobAlignment);
    spec.delegates[i].offset = layout.blobs_size;
    spec.delegates[i].size = blobs[i].size();
    blob_offsets.push_back(layout.blobs_size);
    layout.blobs_size += blobs[i].size();
    auto blob = read_blob(blobs[i]);
    aliased = aliased || (blob.ok() && !blob->metadata.aliases.empty());
  }
  for (WeightSpec& weight : spec.weights) {
    layout.weights_size = detail::align_up(layout.weights_size, kWeightAlignment);
    weight.offset = layout.weights_size;
    layout.weights_size += weight.nbytes;
  }
  spec.required_features.clear();
  if (aliased) spec.required_features.emplace_back(kProgramFeatureAliasedIo);
  std::vector<std::span<const std::byte>> views(blobs.begin(), blobs.end());
  KVRT_RETURN_IF_ERROR(validate_engine_spec(spec, views, layout.weights_size)
                           .with_context("write_engine_file '" + path + "'"));
  return detail::write_container(path, kEngineFileMagic, engine_file_metadata_json(spec), views,
                                 blob_offsets, spec.weights, weights, layout, options);
}

Result<EngineFileView> read_engine_file(std::span<const std::byte> bytes) {
  KVRT_ASSIGN_OR_RETURN(detail::Container container,
                        detail::read_container(bytes, kEngineFileMagic, "engine"));
  EngineFileView view;
  view.version_major = container.version_major;
  view.version_minor = container.version_minor;
  const nlohmann::json& root = container.metadata;
  auto format = root.find("format");
  if (format == root.end() || *format != "kvrt-engine") {
    return invalid_program("engine metadata: format: expected 'kvrt-engine'");
  }
  for (const auto& feature : root["required_features"]) {
    view.spec.required_features.push_back(feature.get<std::string>());
  }
  if (auto producer = root.find("producer"); producer != root.end()) view.spec.producer = *producer;
  const bool strict = container.version_minor <= kProgramVersionMinor;
  for (const auto& [key, unused] : root.items()) {
    if (strict && key != "format" && key != "required_features" && key != "producer" &&
        key != "weights" && key != "delegates") {
      return invalid_program("engine metadata: ", key,
                             ": unknown key (this reader would not "
                             "honour it)");
    }
  }
  KVRT_ASSIGN_OR_RETURN(view.spec.weights, detail::weights_from_json(root, strict));
  KVRT_ASSIGN_OR_RETURN(view.spec.delegates, detail::delegates_from_json(root, strict));
  for (size_t i = 0; i < view.spec.delegates.size(); ++i) {
    const DelegateSpec& delegate = view.spec.delegates[i];
    if (delegate.size > container.blobs.size() ||
        delegate.offset > container.blobs.size() - delegate.size) {
      return invalid_program("engine metadata: delegates[", i, "]: blob range outside the segment");
    }
    view.blobs.push_back(container.blobs.subspan(delegate.offset, delegate.size));
  }
  view.weight_segment = container.weights;
  KVRT_RETURN_IF_ERROR(validate_engine_spec(view.spec, view.blobs, container.weights.size()));
  return view;
}

}  // namespace kvrt::format
