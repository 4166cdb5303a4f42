#include "kvrt/runtime/program.h"

namespace kvrt::runtime {

Result<std::shared_ptr<const Program>> Program::load(const std::string& path) {
  // ProgramFile::open names the path in every error; naming it again would repeat it.
  KVRT_ASSIGN_OR_RETURN(format::ProgramFile file, format::ProgramFile::open(path));
  return std::shared_ptr<const Program>(std::make_shared<Program>(std::move(file)));
}

const format::MethodSpec* Program::find_method(std::string_view name) const {
  const int index = view().find_method(name);
  return index < 0 ? nullptr : &spec().methods[static_cast<size_t>(index)];
}

Result<TensorView> Program::weight(std::string_view name) const {
  return view().weight(name);
}

}  // namespace kvrt::runtime
