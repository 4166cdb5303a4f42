// Model references resolved as huggingface_hub lays out its cache, with no network.
#include "kvrt/api/model_ref.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kvrt {
namespace {

namespace fs = std::filesystem;

class ModelRefTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvrt_model_ref_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    repo_ = dir_ / "hub" / "models--org--name";
    fs::create_directories(repo_ / "refs");
    fs::create_directories(repo_ / "snapshots" / "abc123");
    std::ofstream(repo_ / "refs" / "main") << "abc123\n";
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"}) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name);
    }
    ::setenv("HF_HUB_CACHE", (dir_ / "hub").c_str(), 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    fs::remove_all(dir_);
  }
  fs::path dir_, repo_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(ModelRefTest, RefsMainNamesTheSnapshot) {
  auto location = resolve_model("org/name");
  ASSERT_TRUE(location.ok()) << location.status().to_string();
  EXPECT_EQ(fs::path(location->path), repo_ / "snapshots" / "abc123");
  EXPECT_FALSE(location->is_program);
  EXPECT_EQ(location->hub_id, "org/name@abc123");
  EXPECT_TRUE(resolve_model("org/name@abc123").ok());
}

TEST_F(ModelRefTest, UnknownRevisionListsTheSnapshots) {
  auto location = resolve_model("org/name@v2");
  ASSERT_FALSE(location.ok());
  EXPECT_EQ(location.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(location.status().message().find("abc123"), std::string::npos);
}

TEST_F(ModelRefTest, HubCacheDirFollowsHuggingFaceHub) {
  EXPECT_EQ(hub_cache_dir(), (dir_ / "hub").string());
  ::unsetenv("HF_HUB_CACHE");
  ::setenv("HF_HOME", "/x/hf", 1);
  EXPECT_EQ(hub_cache_dir(), "/x/hf/hub");
}

TEST_F(ModelRefTest, NotAPathNorAReferenceIsNotFound) {
  for (const char* reference : {"/nonexistent/model", "a/b/c", "-x/y", "org/name@"}) {
    auto location = resolve_model(reference);
    ASSERT_FALSE(location.ok()) << reference;
    EXPECT_EQ(location.status().code(), ErrorCode::kNotFound) << reference;
    EXPECT_NE(location.status().message().find(reference), std::string::npos);
  }
}

}  // namespace
}  // namespace kvrt
