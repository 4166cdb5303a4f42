// Every way a user names a model: a Hugging Face hub cache reference resolved offline
// as huggingface_hub lays the cache out, a models--org--name folder, and any spelling
// of a path to a checkpoint directory or a program file.
#include <nlohmann/json.hpp>
#include <vector>

#include "cli_run.h"

namespace kvrt::cli_test {
namespace {

constexpr const char* kSha = "0123456789abcdef0123456789abcdef01234567";

class ModelRef : public CliTest {
 protected:
  // hub/models--kvrt-test--fortune as huggingface_hub writes it: refs/<name> holds
  // a commit sha, snapshots/<sha>/<file> is a relative link to blobs/<file hash>.
  fs::path make_hub(const fs::path& hub) {
    const fs::path repo = hub / "models--kvrt-test--fortune";
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "snapshots" / kSha);
    std::ofstream(repo / "refs" / "main") << kSha;  // no newline, as the hub writes it
    std::ofstream(repo / "refs" / "stable") << kSha << "\n";
    int blob = 0;
    for (const auto& entry : fs::directory_iterator(model_dir())) {
      const std::string name = "blob" + std::to_string(blob++);
      fs::copy_file(entry.path(), repo / "blobs" / name);
      fs::create_symlink(fs::path("../../blobs") / name,
                         repo / "snapshots" / kSha / entry.path().filename());
    }
    return repo;
  }
  std::string greedy_args() const { return " --device cpu --json -p 'A computer' -n 4 --temp 0"; }
  nlohmann::json expected() {
    const CliResult result = kvrt("run " + quoted(model_dir().string()) + greedy_args());
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return nlohmann::json::parse(result.out, nullptr, false)["ids"];
  }
};

TEST_F(ModelRef, HubReferenceResolvesThroughHfHubCache) {
  const fs::path repo = make_hub(work_ / "hub");
  const nlohmann::json ids = expected();
  const std::string env = "HF_HUB_CACHE=" + quoted((work_ / "hub").string());
  for (const std::string& reference : std::vector<std::string>{
           "kvrt-test/fortune", "kvrt-test/fortune@main", "kvrt-test/fortune@stable",
           std::string("kvrt-test/fortune@") + kSha}) {
    const CliResult result = kvrt("run " + reference + greedy_args(), env);
    ASSERT_EQ(result.exit_code, 0) << reference << ": " << result.err;
    EXPECT_EQ(nlohmann::json::parse(result.out)["ids"], ids) << reference;
  }
  // kvrt cache list names the hub model.
  const CliResult listed = kvrt("cache list");
  EXPECT_NE(listed.out.find(std::string("kvrt-test/fortune@") + std::string(kSha).substr(0, 12)),
            std::string::npos)
      << listed.out;
  // The models--org--name folder itself, with and without a trailing slash.
  for (const std::string& folder : {repo.string(), repo.string() + "/"}) {
    const CliResult result = kvrt("run " + quoted(folder) + greedy_args());
    ASSERT_EQ(result.exit_code, 0) << folder << ": " << result.err;
    EXPECT_EQ(nlohmann::json::parse(result.out)["ids"], ids);
  }
}

TEST_F(ModelRef, HfHomeAndXdgCacheHomeLocateTheHub) {
  make_hub(work_ / "hfhome" / "hub");
  const CliResult home = kvrt("run kvrt-test/fortune" + greedy_args(),
                              "HF_HOME=" + quoted((work_ / "hfhome").string()));
  EXPECT_EQ(home.exit_code, 0) << home.err;
  // Without HF_HOME: $XDG_CACHE_HOME/huggingface/hub (the tests' XDG_CACHE_HOME).
  make_hub(work_ / "cache" / "huggingface" / "hub");
  const CliResult xdg = kvrt("run kvrt-test/fortune" + greedy_args());
  EXPECT_EQ(xdg.exit_code, 0) << xdg.err;
}

TEST_F(ModelRef, MissingHubModelSaysWhereItLooked) {
  const std::string env = "HF_HUB_CACHE=" + quoted((work_ / "hub").string());
  const CliResult missing = kvrt("run nobody/nothing -p hi", env);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find((work_ / "hub" / "models--nobody--nothing").string()),
            std::string::npos)
      << missing.err;
  EXPECT_NE(missing.err.find("huggingface-cli download nobody/nothing"), std::string::npos);
  make_hub(work_ / "hub");
  const CliResult revision = kvrt("run kvrt-test/fortune@v9 -p hi", env);
  EXPECT_EQ(revision.exit_code, 1);
  EXPECT_NE(revision.err.find("revision 'v9'"), std::string::npos) << revision.err;
  EXPECT_NE(revision.err.find(kSha), std::string::npos) << revision.err;  // what exists
}

// A path that exists wins over a hub reference of the same spelling.
TEST_F(ModelRef, ExistingPathWinsOverAHubReference) {
  fs::create_directories(work_ / "kvrt-test");
  fs::copy(model_dir(), work_ / "kvrt-test" / "fortune");
  const CliResult result = kvrt("run kvrt-test/fortune" + greedy_args());
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST_F(ModelRef, EverySpellingOfAPathWorks) {
  const nlohmann::json ids = expected();
  const CliResult exported = kvrt("export " + quoted(model_dir().string()) + " -q -o " +
                                  quoted((work_ / "m.kvrt").string()));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  fs::create_directories(work_ / "sub");
  fs::copy(model_dir(), work_ / "ckpt");
  for (const std::string& spelling :
       {std::string("m.kvrt"), std::string("./m.kvrt"), (work_ / "m.kvrt").string(),
        std::string("sub/../m.kvrt"), std::string("ckpt"), std::string("ckpt/"),
        std::string("./ckpt"), (work_ / "ckpt").string() + "/"}) {
    const CliResult result = kvrt("run " + quoted(spelling) + greedy_args());
    ASSERT_EQ(result.exit_code, 0) << spelling << ": " << result.err;
    EXPECT_EQ(nlohmann::json::parse(result.out)["ids"], ids) << spelling;
  }
  // From another directory, a program file finds the tokenizer of its checkpoint.
  const CliResult elsewhere = kvrt("run ../m.kvrt" + greedy_args(), "", work_ / "sub");
  EXPECT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
}

}  // namespace
}  // namespace kvrt::cli_test
