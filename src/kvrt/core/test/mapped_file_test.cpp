#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kvrt/core/mapped_file.h"

namespace kvrt {
namespace {

TEST(MappedFile, MapsFileBytes) {
  auto path = std::filesystem::temp_directory_path() / "kvrt_mapped_file_test.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << "hello";
  }
  auto file = MappedFile::open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ(file->size(), 5u);
  EXPECT_EQ(static_cast<char>(file->bytes()[0]), 'h');
  std::filesystem::remove(path);
}

TEST(MappedFile, MissingFileIsNotFoundNamingThePath) {
  auto file = MappedFile::open("/nonexistent/kvrt/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(file.status().message().find("model.safetensors"), std::string::npos);
}

TEST(MappedFile, DirectoryIsRejected) {
  auto file = MappedFile::open(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvrt
