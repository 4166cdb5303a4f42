// The export cache's key and bookkeeping, below the CLI (tools/kvrt/test/cache_cli_test
// covers it end to end).
#include "kvrt/api/export_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kvrt {
namespace {

namespace fs = std::filesystem;

class ExportCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvrt_export_cache_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "ckpt");
    std::ofstream(dir_ / "ckpt" / "config.json") << R"({"vocab_size": 8})";
    std::ofstream(dir_ / "ckpt" / "model.safetensors") << "weights";
    std::ofstream(dir_ / "ckpt" / "tokenizer.json") << "{}";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string key(const fs::path& checkpoint, int64_t max_seq = 0) {
    ExportCache cache((dir_ / "cache").string());
    ExportRequest request;
    request.checkpoint_dir = checkpoint.string();
    request.max_seq = max_seq;
    auto result = cache.key(request);
    EXPECT_TRUE(result.ok()) << result.status().to_string();
    return result.ok() ? result->hash : "";
  }
  fs::path dir_;
};

TEST_F(ExportCacheTest, KeyFollowsContentNotPathOrTime) {
  const std::string first = key(dir_ / "ckpt");
  EXPECT_EQ(first.size(), 16u);
  fs::copy(dir_ / "ckpt", dir_ / "copy");
  EXPECT_EQ(key(dir_ / "copy"), first);
  fs::last_write_time(dir_ / "copy" / "model.safetensors",
                      fs::file_time_type::clock::now() + std::chrono::hours(2));
  EXPECT_EQ(key(dir_ / "copy"), first);
  std::ofstream(dir_ / "copy" / "tokenizer.json") << R"({"x": 1})";  // not in the program
  EXPECT_EQ(key(dir_ / "copy"), first);
  EXPECT_NE(key(dir_ / "ckpt", 64), first);
  std::ofstream(dir_ / "copy" / "model.safetensors") << "weightz";
  EXPECT_NE(key(dir_ / "copy"), first);
  std::ofstream(dir_ / "copy" / "model.safetensors") << "weights";
  std::ofstream(dir_ / "copy" / "config.json") << R"({"vocab_size": 9})";
  EXPECT_NE(key(dir_ / "copy"), first);
}

TEST_F(ExportCacheTest, EvictionRemovesTheLeastRecentlyUsedFirst) {
  ExportCache cache((dir_ / "cache").string(), 25);
  fs::create_directories(cache.dir());
  ProgramKey key{"0000000000000000", 0, 0, DType::kF32};
  std::vector<std::string> programs;
  for (const char* name : {"a", "b", "c"}) {
    programs.push_back((fs::path(cache.dir()) / (std::string(name) + "-k.kvrt")).string());
    std::ofstream(programs.back()) << std::string(10, 'x');
    ASSERT_TRUE(cache.record_use(programs.back(), key, (dir_ / "ckpt").string()).ok());
  }
  ASSERT_TRUE(cache.record_use(programs[0], key, (dir_ / "ckpt").string()).ok());  // a: newest
  auto removed = cache.evict(programs[2]);
  ASSERT_TRUE(removed.ok());
  ASSERT_EQ(removed->size(), 1u);
  EXPECT_EQ(removed->front(), programs[1]);
  auto listed = cache.list();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].path, programs[0]);  // most recent first
  EXPECT_EQ((*listed)[0].source, (dir_ / "ckpt").string());
  auto freed = cache.clean();
  ASSERT_TRUE(freed.ok());
  EXPECT_GE(*freed, 20u);  // the programs and their sidecars
  EXPECT_TRUE(cache.list()->empty());
}

TEST_F(ExportCacheTest, LimitComesFromTheEnvironment) {
  ::setenv("KVRT_CACHE_LIMIT", "2G", 1);
  EXPECT_EQ(*ExportCache::default_limit(), 2000000000u);
  ::setenv("KVRT_CACHE_LIMIT", "1.5M", 1);
  EXPECT_EQ(*ExportCache::default_limit(), 1500000u);
  ::setenv("KVRT_CACHE_LIMIT", "big", 1);
  EXPECT_FALSE(ExportCache::default_limit().ok());
  ::unsetenv("KVRT_CACHE_LIMIT");
  EXPECT_EQ(*ExportCache::default_limit(), ExportCache::kDefaultLimitBytes);
}

}  // namespace
}  // namespace kvrt
