// The program file's container: the 64-byte header, the segment layout, the atomic
// writer (temporary file, mapped and filled in place, renamed on success) and the
// mapping reader. The metadata schema lives in program_json.cpp, the semantic checks
// in program_validate.cpp.
#include "kvrt/format/program.h"

#include "kvrt/format/program_container.h"
#include "kvrt/format/program_json.h"

namespace kvrt::format {
namespace {

using detail::align_up;

// Lays out blobs and weights, each 64-aligned in table order, and returns the segment
// sizes.
detail::ContainerLayout assign_offsets(ProgramSpec& spec,
                                       std::span<const std::vector<std::byte>> blobs) {
  detail::ContainerLayout layout;
  uint64_t offset = 0;
  for (size_t i = 0; i < spec.delegates.size(); ++i) {
    offset = align_up(offset, kBlobAlignment);
    spec.delegates[i].offset = offset;
    spec.delegates[i].size = blobs[i].size();
    offset += blobs[i].size();
  }
  layout.blobs_size = offset;
  offset = 0;
  for (WeightSpec& weight : spec.weights) {
    offset = align_up(offset, kWeightAlignment);
    weight.offset = offset;
    offset += weight.nbytes;
  }
  layout.weights_size = offset;
  return layout;
}

}  // namespace

Status write_program(const std::string& path, const ProgramSpec& input_spec,
                     std::span<const std::vector<std::byte>> blobs,
                     std::span<const WeightSource> weights, const ProgramWriteOptions& options) {
  if (blobs.size() != input_spec.delegates.size()) {
    return invalid_argument("write_program: ", blobs.size(), " blobs for ",
                            input_spec.delegates.size(), " delegates");
  }
  if (weights.size() != input_spec.weights.size()) {
    return invalid_argument("write_program: ", weights.size(), " weight sources for ",
                            input_spec.weights.size(), " weights");
  }
  ProgramSpec spec = input_spec;
  spec.required_features = detail::program_features_needed(spec);
  const detail::ContainerLayout layout = assign_offsets(spec, blobs);
  std::vector<std::span<const std::byte>> blob_views(blobs.begin(), blobs.end());
  std::vector<uint64_t> blob_offsets;
  for (const DelegateSpec& delegate : spec.delegates) blob_offsets.push_back(delegate.offset);
  KVRT_RETURN_IF_ERROR(detail::validate_program_spec(spec, blob_views, layout.weights_size)
                           .with_context("write_program '" + path + "'"));
  return detail::write_container(path, kProgramMagic, program_metadata_json(spec), blob_views,
                                 blob_offsets, spec.weights, weights, layout, options);
}

Status validate_program(const ProgramSpec& input_spec,
                        std::span<const std::vector<std::byte>> blobs) {
  if (blobs.size() != input_spec.delegates.size()) {
    return invalid_argument("validate_program: ", blobs.size(), " blobs for ",
                            input_spec.delegates.size(), " delegates");
  }
  ProgramSpec spec = input_spec;
  spec.required_features = detail::program_features_needed(spec);
  const detail::ContainerLayout layout = assign_offsets(spec, blobs);
  std::vector<std::span<const std::byte>> blob_views(blobs.begin(), blobs.end());
  return detail::validate_program_spec(spec, blob_views, layout.weights_size);
}

Status write_program(const std::string& path, const ProgramSpec& spec,
                     std::span<const std::vector<std::byte>> blobs,
                     std::span<const WeightFiller> fillers, const ProgramWriteOptions& options) {
  const std::vector<WeightSource> sources(fillers.begin(), fillers.end());
  return write_program(path, spec, blobs, sources, options);
}

int ProgramView::find_weight(std::string_view name) const {
  for (size_t i = 0; i < spec.weights.size(); ++i) {
    if (spec.weights[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int ProgramView::find_buffer(std::string_view name) const {
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    if (spec.buffers[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int ProgramView::find_method(std::string_view name) const {
  for (size_t i = 0; i < spec.methods.size(); ++i) {
    if (spec.methods[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::span<const std::byte> ProgramView::weight_bytes(size_t index) const {
  const WeightSpec& weight = spec.weights[index];
  return weight_segment.subspan(weight.offset, weight.nbytes);
}

Result<TensorView> ProgramView::weight(std::string_view name) const {
  const int index = find_weight(name);
  if (index < 0) return not_found("program has no weight '", name, "'");
  const WeightSpec& spec_entry = spec.weights[static_cast<size_t>(index)];
  KVRT_ASSIGN_OR_RETURN(Shape shape, Shape::from_span(spec_entry.shape));
  // The mapping is read-only; TensorView has no const flavour, and engines never write
  // weights (engine.h).
  void* data = const_cast<std::byte*>(weight_bytes(static_cast<size_t>(index)).data());
  return TensorView(data, spec_entry.dtype, shape, Device::cpu());
}

Result<ProgramView> read_program(std::span<const std::byte> bytes) {
  KVRT_ASSIGN_OR_RETURN(detail::Container container,
                        detail::read_container(bytes, kProgramMagic, "program"));
  ProgramView view;
  view.version_major = container.version_major;
  view.version_minor = container.version_minor;
  // A newer minor version may add optional keys; this reader skips what it does not know.
  const bool strict = container.version_minor <= kProgramVersionMinor;
  KVRT_ASSIGN_OR_RETURN(view.spec, detail::program_spec_from_json(container.metadata, strict));
  for (size_t i = 0; i < view.spec.delegates.size(); ++i) {
    const DelegateSpec& delegate = view.spec.delegates[i];
    if (delegate.size > container.blobs.size() ||
        delegate.offset > container.blobs.size() - delegate.size) {
      return invalid_program("program metadata: delegates[", i,
                             "]: blob range outside the blob segment");
    }
    view.blobs.push_back(container.blobs.subspan(delegate.offset, delegate.size));
  }
  view.weight_segment = container.weights;
  KVRT_RETURN_IF_ERROR(
      detail::validate_program_spec(view.spec, view.blobs, container.weights.size()));
  return view;
}

Result<ProgramFile> ProgramFile::open(const std::string& path) {
  ProgramFile program;
  KVRT_ASSIGN_OR_RETURN(program.file_, MappedFile::open(path));
  auto view = read_program(program.file_.bytes());
  if (!view.ok()) return view.status().with_context("'" + path + "'");
  program.view_ = std::move(view).value();
  return program;
}

}  // namespace kvrt::format
