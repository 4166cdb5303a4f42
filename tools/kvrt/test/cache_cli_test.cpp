// The export cache as a user meets it: one program per distinct checkpoint content and
// export options, whatever the path or modification time; a size limit with least
// recently used eviction; `kvrt cache list` and `kvrt cache clean`.
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace kvrt::cli_test {
namespace {

class Cache : public CliTest {
 protected:
  CliResult run(const fs::path& model, const std::string& extra = "", const std::string& env = "") {
    return kvrt("run " + quoted(model.string()) + " --device cpu -p hi -n 2 --temp 0 " + extra,
                env);
  }
  nlohmann::json list() {
    const CliResult result = kvrt("cache list --json");
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return nlohmann::json::parse(result.out, nullptr, false);
  }
};

// The four copies: a touch, a move and a copy of one checkpoint reuse one
// program; a different context length is a different program.
TEST_F(Cache, OneProgramPerContentNotPerPathOrTime) {
  fs::copy(model_dir(), work_ / "a");
  ASSERT_EQ(run(work_ / "a").exit_code, 0);
  ASSERT_EQ(programs_in_cache(), 1u);
  fs::last_write_time(
      work_ / "a" / "model.safetensors",
      fs::last_write_time(work_ / "a" / "model.safetensors") + std::chrono::hours(1));
  ASSERT_EQ(run(work_ / "a").exit_code, 0);
  fs::rename(work_ / "a", work_ / "b");
  ASSERT_EQ(run(work_ / "b").exit_code, 0);
  fs::copy(work_ / "b", work_ / "c");
  const CliResult copy = run(work_ / "c/");
  ASSERT_EQ(copy.exit_code, 0) << copy.err;
  EXPECT_EQ(copy.err.find("exporting"), std::string::npos) << "exported again: " << copy.err;
  EXPECT_EQ(programs_in_cache(), 1u);
  ASSERT_EQ(run(work_ / "c", "-c 64").exit_code, 0);
  EXPECT_EQ(programs_in_cache(), 2u);
  // No "-<hash>.kvrt" from a trailing slash: every program is named after its checkpoint.
  // The listing is held: list()["programs"] would refer into a temporary the loop outlives.
  const nlohmann::json listing = list();
  for (const auto& program : listing["programs"]) {
    const std::string name = fs::path(program["path"].get<std::string>()).filename().string();
    EXPECT_FALSE(name.starts_with("-")) << name;
  }
}

TEST_F(Cache, ChangedWeightsAreANewProgram) {
  fs::copy(model_dir(), work_ / "a");
  ASSERT_EQ(run(work_ / "a").exit_code, 0);
  {
    std::fstream file(work_ / "a" / "model.safetensors",
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-4, std::ios::end);
    file.write("\x01\x02\x03\x04", 4);  // the last weight's last bytes, same size
  }
  ASSERT_EQ(run(work_ / "a").exit_code, 0);
  EXPECT_EQ(programs_in_cache(), 2u);
}

TEST_F(Cache, ListShowsSizeSourceAndLastUse) {
  ASSERT_EQ(run(model_dir()).exit_code, 0);
  const nlohmann::json json = list();
  ASSERT_EQ(json["programs"].size(), 1u) << json.dump();
  const nlohmann::json& program = json["programs"][0];
  EXPECT_GT(program["bytes"].get<uint64_t>(), 1000000u);
  EXPECT_EQ(fs::path(program["source"].get<std::string>()), fs::canonical(model_dir()));
  EXPECT_GT(program["last_used"].get<int64_t>(), 1700000000);
  EXPECT_EQ(program["cache_dtype"], "f32");
  const CliResult text = kvrt("cache list");
  EXPECT_NE(text.out.find("1 program"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(fs::canonical(model_dir()).string()), std::string::npos) << text.out;
}

// Past the limit, the least recently used program goes; the one just written stays.
TEST_F(Cache, LimitEvictsTheLeastRecentlyUsed) {
  ASSERT_EQ(run(model_dir(), "-c 32").exit_code, 0);
  ASSERT_EQ(run(model_dir(), "-c 48").exit_code, 0);
  ASSERT_EQ(run(model_dir(), "-c 32").exit_code, 0);  // a use: 48 is now the oldest
  ASSERT_EQ(programs_in_cache(), 2u);
  const uint64_t one = list()["programs"][0]["bytes"].get<uint64_t>();
  const std::string limit = "KVRT_CACHE_LIMIT=" + std::to_string(one * 2 + one / 2);
  ASSERT_EQ(run(model_dir(), "-c 64", limit).exit_code, 0);
  const nlohmann::json json = list();
  ASSERT_EQ(json["programs"].size(), 2u) << json.dump();
  for (const auto& program : json["programs"]) EXPECT_NE(program["max_seq"], 48) << json.dump();
  const CliResult bad = run(model_dir(), "", "KVRT_CACHE_LIMIT=lots");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("KVRT_CACHE_LIMIT"), std::string::npos) << bad.err;
}

// kvrt check and kvrt bench export a checkpoint once too, instead of on every run.
TEST_F(Cache, CheckAndBenchReuseTheirPrograms) {
  const std::string check = "check " + quoted(fixture("llama_gqa").string()) + " --timing-steps 1";
  const CliResult first = kvrt(check);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("exported "), std::string::npos) << first.out;
  const CliResult second = kvrt(check);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("cached program of "), std::string::npos) << second.out;
  EXPECT_EQ(programs_in_cache(), 1u);
  const std::string bench =
      "bench " + quoted(model_dir().string()) + " --device cpu -p 8 -n 4 -d 0 -r 1 --json";
  ASSERT_EQ(kvrt(bench).exit_code, 0);
  const CliResult again = kvrt(bench);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err.find("exporting"), std::string::npos) << again.err;
  EXPECT_EQ(programs_in_cache(), 2u);
}

TEST_F(Cache, CleanRemovesEverything) {
  ASSERT_EQ(run(model_dir()).exit_code, 0);
  const CliResult clean = kvrt("cache clean");
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("MB"), std::string::npos) << clean.out;
  EXPECT_EQ(programs_in_cache(), 0u);
  EXPECT_TRUE(fs::is_empty(cache_dir()));
  EXPECT_EQ(list()["programs"].size(), 0u);
}

}  // namespace
}  // namespace kvrt::cli_test
