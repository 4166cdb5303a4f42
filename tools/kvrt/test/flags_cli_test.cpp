// llama.cpp's flag names, kvrt's older names as aliases, the defaults in --help, "did
// you mean", and a random seed that is printed so that a run can be repeated.
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace kvrt::cli_test {
namespace {

class Flags : public CliTest {
 protected:
  nlohmann::json run_json(const std::string& flags) {
    const CliResult result =
        kvrt("run " + quoted(model_dir().string()) + " --device cpu --json " + flags);
    EXPECT_EQ(result.exit_code, 0) << flags << ": " << result.err;
    return nlohmann::json::parse(result.out, nullptr, false);
  }
};

TEST_F(Flags, LlamaCppNamesMeanWhatTheyMeanThere) {
  std::ofstream(work_ / "prompt.txt") << "A computer";
  const nlohmann::json llama = run_json(
      "-f prompt.txt -n 6 --temp 0 -c 64 -t 1 --repeat-penalty 1.0 --top-k 40 --top-p 0.9 "
      "--min-p 0.05 -s 7");
  const nlohmann::json kvrt_names = run_json(
      "--prompt 'A computer' --max-new-tokens 6 --temperature 0 --max-seq 64 --threads 1 "
      "--repetition-penalty 1.0 --seed 7");
  ASSERT_TRUE(llama.is_object() && kvrt_names.is_object());
  EXPECT_EQ(llama["ids"], kvrt_names["ids"]);
  EXPECT_EQ(llama["ids"].size(), 6u);
  // -m is the positional MODEL.
  const CliResult named = kvrt("run -m " + quoted(model_dir().string()) +
                               " --device cpu --json -p 'A computer' -n 6 --temp 0 -c 64");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(nlohmann::json::parse(named.out)["ids"], llama["ids"]);
}

TEST_F(Flags, NglIsTheGpuLayerCountNotNWithAValue) {
  // -ngl 0: the CPU. (-n gl would have been refused as a count.)
  const CliResult cpu = kvrt("run " + quoted(model_dir().string()) + " -p hi -n 2 -ngl 0 --json");
  EXPECT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(nlohmann::json::parse(cpu.out, nullptr, false).value("device", ""), "cpu");
  // -ngl 99: the GPU; where there is none, the reason, not a parse error.
  const CliResult gpu = kvrt("run " + quoted(model_dir().string()) + " -p hi -n 2 -ngl 99 --json");
  if (gpu.exit_code == 0) {
    EXPECT_EQ(nlohmann::json::parse(gpu.out).value("device", "").rfind("cuda", 0), 0u);
  } else {
    EXPECT_NE(gpu.err.find("CUDA"), std::string::npos) << gpu.err;
    EXPECT_EQ(gpu.err.find("gl"), std::string::npos) << gpu.err;
  }
  const CliResult disagree =
      kvrt("run " + quoted(model_dir().string()) + " -p hi -ngl 99 --device cpu");
  EXPECT_NE(disagree.exit_code, 0);
  EXPECT_NE(disagree.err.find("disagree"), std::string::npos) << disagree.err;
}

TEST_F(Flags, LlamaCppFlagsKvrtLacksAreRefusedByName) {
  const CliResult result = kvrt("run " + quoted(model_dir().string()) + " -p hi -fa");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("'-fa' is a llama.cpp option"), std::string::npos) << result.err;
}

TEST_F(Flags, VersionFlagPrintsTheVersion) {
  const CliResult flag = kvrt("--version");
  EXPECT_EQ(flag.exit_code, 0);
  EXPECT_EQ(flag.out.rfind("kvrt ", 0), 0u) << flag.out;
  EXPECT_EQ(kvrt("version").out, flag.out);
}

TEST_F(Flags, HelpShowsDefaultsAndExamples) {
  const CliResult help = kvrt("run --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* part : {"--temp", "--temperature", "=model", "=auto", "=-1", "-ngl",
                           "--ctx-size", "Examples:", "generation_config.json"}) {
    EXPECT_NE(help.out.find(part), std::string::npos) << part << "\n" << help.out;
  }
}

TEST_F(Flags, MisspelledCommandGetsASuggestion) {
  const CliResult result = kvrt("rn models/x -p hi");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("Did you mean 'kvrt run'?"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("export"), std::string::npos) << result.err;             // the list
  EXPECT_NE(kvrt("chta").err.find("Did you mean 'kvrt chat'?"), std::string::npos);  // a swap
  EXPECT_EQ(kvrt("frobnicate").err.find("Did you mean"), std::string::npos);
  const CliResult nothing = kvrt("");
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.err.find("Subcommands:"), std::string::npos) << nothing.err;
}

TEST_F(Flags, MisspelledFlagGetsASuggestion) {
  const CliResult result = kvrt("run " + quoted(model_dir().string()) + " -p hi --tmp 0.5");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("did you mean --temp?"), std::string::npos) << result.err;
}

// A sampled run without --seed draws a random seed and says which; --seed repeats it.
TEST_F(Flags, RandomSeedIsPrintedAndRepeatsTheRun) {
  const std::string base =
      "run " + quoted(model_dir().string()) + " --device cpu --json -p 'A computer' -n 12 --temp 1";
  const CliResult first = kvrt(base);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const size_t at = first.err.find("seed: ");
  ASSERT_NE(at, std::string::npos) << first.err;
  const std::string seed = first.err.substr(at + 6, first.err.find(' ', at + 6) - at - 6);
  const nlohmann::json json = nlohmann::json::parse(first.out);
  EXPECT_EQ(std::to_string(json["seed"].get<uint64_t>()), seed);
  const CliResult again = kvrt(base + " -s " + seed);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["ids"], json["ids"]);
  // Two unseeded runs draw different seeds.
  const CliResult other = kvrt(base);
  EXPECT_NE(nlohmann::json::parse(other.out)["seed"], json["seed"]);
}

// Greedy runs (the bundled model's generation_config.json has no do_sample) print no
// seed; the API's default_options gives the CLI's result.
TEST_F(Flags, DefaultsComeFromTheModel) {
  const nlohmann::json json = run_json("-p 'A computer' -n 8");
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json["temperature"].get<double>(), 0.0);
  const nlohmann::json greedy = run_json("-p 'A computer' -n 8 --temp 0");
  EXPECT_EQ(json["ids"], greedy["ids"]);
}

TEST_F(Flags, NPredictMinusOneRunsToTheContext) {
  const nlohmann::json json = run_json("-p 'A computer' -n -1 -c 16 --ignore-eos");
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json["stop_reason"], "max_context");
  EXPECT_EQ(json["prompt_tokens"].get<int>() + json["generated_tokens"].get<int>(), 16);
}

TEST_F(Flags, InteractiveRefusesJsonAndTakesThePromptAsTheFirstTurn) {
  const CliResult json = kvrt("run " + quoted(model_dir().string()) + " -i --json");
  EXPECT_NE(json.exit_code, 0);
  EXPECT_NE(json.err.find("--json"), std::string::npos) << json.err;
  const CliResult turn = kvrt("run " + quoted(model_dir().string()) +
                              " --device cpu -i -p 'A computer' -n 4 --temp 0");
  EXPECT_EQ(turn.exit_code, 0) << turn.err;
  EXPECT_EQ(turn.out.rfind("A computer", 0), 0u) << turn.out;
}

}  // namespace
}  // namespace kvrt::cli_test

namespace kvrt::cli_test {
namespace {

// Commands of -i are not sent to the model; /quit ends the run.
TEST_F(Flags, InteractiveCommandsAreNotPrompts) {
  const CliResult result =
      kvrt("run " + quoted(model_dir().string()) + " --device cpu -i -n 3 --temp 0", "", {},
           "/help\nA computer\n/reset\n/quit\nnever read\n");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("/reset  forget"), std::string::npos) << result.err;
  // One turn ran: one stats line.
  const size_t first = result.err.find("time to first token");
  ASSERT_NE(first, std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("time to first token", first + 1), std::string::npos) << result.err;
}

}  // namespace
}  // namespace kvrt::cli_test
