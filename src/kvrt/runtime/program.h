// Program: a program file mapped and verified once, shared by every Method and Module
// that runs it. Weights are served as views into the mapping (never copied on the
// host), which makes a Program the WeightProvider every delegate builds its engine from.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kvrt/core/result.h"
#include "kvrt/engine/common/engine.h"
#include "kvrt/format/program.h"

namespace kvrt::runtime {

class Program final : public engine::WeightProvider {
 public:
  // Maps and verifies `path` (format::read_program: magic, version, features,
  // segments, schema, references). Errors: NotFound for a missing file,
  // InvalidProgram naming the field for anything malformed.
  static Result<std::shared_ptr<const Program>> load(const std::string& path);

  const format::ProgramSpec& spec() const { return file_.spec(); }
  const format::ProgramView& view() const { return file_.view(); }
  const std::string& path() const { return file_.path(); }

  // The method named `name`, or nullptr.
  const format::MethodSpec* find_method(std::string_view name) const;
  // The bytes of delegate blob `index` (a view into the mapping).
  std::span<const std::byte> blob(size_t index) const { return view().blobs[index]; }
  // A read-only host view of weight `name`; NotFound otherwise.
  Result<TensorView> weight(std::string_view name) const override;

  explicit Program(format::ProgramFile file) : file_(std::move(file)) {}

 private:
  format::ProgramFile file_;
};

}  // namespace kvrt::runtime
