// What can be checked before a long export is checked first: each failure names the
// file at fault, and nothing is written to the export cache.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace kvrt::cli_test {
namespace {

class Preflight : public CliTest {
 protected:
  void expect_refused_early(const CliResult& result, const std::string& names) {
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_NE(result.err.find(names), std::string::npos) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.err.find("exporting"), std::string::npos) << result.err;
    EXPECT_EQ(programs_in_cache(), 0u) << "exported before refusing";
  }
};

TEST_F(Preflight, TextWithoutATokenizerFailsBeforeTheExport) {
  fs::copy(fixture("llama_gqa"), work_ / "ckpt");
  const CliResult result = kvrt("run ckpt --device cpu -p hi");
  expect_refused_early(result, "no tokenizer.json in 'ckpt'");
  EXPECT_NE(result.err.find("--tokenizer"), std::string::npos) << result.err;
  // Token ids need no tokenizer.
  EXPECT_EQ(kvrt("run ckpt --device cpu --prompt-ids 1,2 -n 2 --json").exit_code, 0);
}

// A program file without a tokenizer beside it or in its recorded checkpoint: the load
// says where it looked, instead of failing at the first encode.
TEST_F(Preflight, ProgramWithoutATokenizerSaysWhereItLooked) {
  ASSERT_EQ(kvrt("export " + quoted(fixture("llama_gqa").string()) + " -q -o m.kvrt").exit_code, 0);
  const CliResult result = kvrt("run m.kvrt --device cpu -p hi");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("no tokenizer.json for 'm.kvrt': looked beside it and in the "
                            "checkpoint it was exported from"),
            std::string::npos)
      << result.err;
  // A tokenizer of another vocabulary is refused against the program's vocabulary.
  const CliResult other = kvrt("run m.kvrt --device cpu -p hi --tokenizer " +
                               quoted((model_dir() / "tokenizer.json").string()));
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("has vocab_size 256"), std::string::npos) << other.err;
}

TEST_F(Preflight, TokenizerOfAnotherVocabularyIsRefused) {
  fs::copy(fixture("llama_gqa"), work_ / "ckpt");
  fs::copy(model_dir() / "tokenizer.json", work_ / "ckpt" / "tokenizer.json");
  const CliResult result = kvrt("run ckpt --device cpu -p hi");
  expect_refused_early(result, "ckpt/tokenizer.json' has token ids up to 4095");
  EXPECT_NE(result.err.find("ckpt/config.json has vocab_size 256"), std::string::npos)
      << result.err;
  // The same through --tokenizer, and at `kvrt export`.
  fs::remove(work_ / "ckpt" / "tokenizer.json");
  const CliResult flag = kvrt("run ckpt --device cpu -p hi --tokenizer " +
                              quoted((model_dir() / "tokenizer.json").string()));
  expect_refused_early(flag, "has vocab_size 256");
  fs::copy(model_dir() / "tokenizer.json", work_ / "ckpt" / "tokenizer.json");
  const CliResult exported = kvrt("export ckpt -q -o out.kvrt");
  EXPECT_EQ(exported.exit_code, 1);
  EXPECT_NE(exported.err.find("has vocab_size 256"), std::string::npos) << exported.err;
  EXPECT_FALSE(fs::exists(work_ / "out.kvrt"));
}

TEST_F(Preflight, UnsupportedArchitectureNamesConfigJson) {
  fs::copy(fixture("llama_gqa"), work_ / "ckpt");
  nlohmann::json config = nlohmann::json::parse(read_text(work_ / "ckpt/config.json"));
  config["architectures"] = {"FalconForCausalLM"};
  config["model_type"] = "falcon";
  std::ofstream(work_ / "ckpt/config.json") << config.dump();
  const CliResult result = kvrt("run ckpt --device cpu --prompt-ids 1,2");
  expect_refused_early(result, "ckpt/config.json");
  EXPECT_NE(result.err.find("Falcon"), std::string::npos) << result.err;
}

TEST_F(Preflight, DirectoryWithoutConfigIsNotACheckpoint) {
  fs::create_directories(work_ / "empty");
  const CliResult result = kvrt("run empty --device cpu -p hi");
  expect_refused_early(result, "'empty' is not a checkpoint: it has no config.json");
}

}  // namespace
}  // namespace kvrt::cli_test
