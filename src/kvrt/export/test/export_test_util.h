// Fixtures for exporter tests: the reference checkpoints in tests/fixtures (located via
// KVRT_FIXTURES_DIR, else KVRT_SOURCE_DIR/tests/fixtures; tests skip when absent), a
// scratch directory, and rewriting a checkpoint's weights to corrupt it on purpose.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kvrt/export/exporter.h"
#include "kvrt/frontend/safetensors_writer.h"
#include "kvrt/frontend/weight_index.h"

namespace kvrt::exporter::testing {

inline std::string fixtures_dir() {
  if (const char* env = std::getenv("KVRT_FIXTURES_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return std::string(KVRT_SOURCE_DIR) + "/tests/fixtures";
}

// The fixture directory, or "" when it is not there.
inline std::string fixture(const std::string& name) {
  const std::string dir = fixtures_dir() + "/" + name;
  return std::filesystem::exists(dir + "/config.json") ? dir : "";
}

#define KVRT_REQUIRE_FIXTURE(var, name)                             \
  const std::string var = ::kvrt::exporter::testing::fixture(name); \
  if (var.empty())                                                  \
  GTEST_SKIP() << "fixture " << name << " not found under "         \
               << ::kvrt::exporter::testing::fixtures_dir()

class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "kvrt_export_" + std::to_string(::getpid());
    if (info != nullptr) name += std::string("_") + info->test_suite_name() + "_" + info->name();
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }
  std::vector<std::string> entries(const std::string& sub = "") const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_ / sub)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

// Copies a fixture's config files into `dir` and rewrites its weights as one
// model.safetensors, letting `edit` drop (return false) or reshape tensors.
using TensorEdit = std::function<bool(frontend::TensorToWrite& tensor)>;
inline Status copy_checkpoint(const std::string& from, const std::string& dir,
                              const TensorEdit& edit = {}) {
  std::filesystem::create_directories(dir);
  for (const char* name : {"config.json", "generation_config.json"}) {
    std::filesystem::copy_file(from + "/" + name, dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing);
  }
  KVRT_ASSIGN_OR_RETURN(frontend::WeightIndex index, frontend::WeightIndex::open_dir(from));
  std::vector<frontend::TensorToWrite> tensors;
  for (const frontend::WeightEntry& entry : index.entries()) {
    frontend::TensorToWrite tensor{entry.record.name, entry.record.dtype, entry.record.shape, {}};
    KVRT_ASSIGN_OR_RETURN(tensor.data, index.bytes(entry));
    if (edit && !edit(tensor)) continue;
    tensors.push_back(tensor);
  }
  return frontend::write_safetensors(
      dir + "/model.safetensors", tensors, [&](size_t i, std::span<std::byte> out) {
        std::fill(out.begin(), out.end(), std::byte{0});
        const auto& data = tensors[i].data;
        std::copy_n(data.begin(), std::min(out.size(), data.size()), out.begin());
        return Status();
      });
}

inline ExportOptions options_for(const std::string& checkpoint, const std::string& output) {
  ExportOptions options;
  options.checkpoint_dir = checkpoint;
  options.output_path = output;
  return options;
}

}  // namespace kvrt::exporter::testing
