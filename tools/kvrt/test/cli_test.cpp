// The `kvrt` binary as a user runs it: greedy `kvrt run --json` on a fixture checkpoint
// returns exactly the ids HF transformers produced, and bad input is a one-line error.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return env ? env : KVRT_SOURCE_DIR;
}

struct Output {
  int exit_code = -1;
  std::string text;
};

// Runs the CLI with stdout captured (stderr goes to a file so JSON stays clean).
Output run_cli(const std::string& args, const fs::path& stderr_file) {
  const fs::path cache = fs::temp_directory_path() / "kvrt_cli_test_cache";
  const std::string command = "XDG_CACHE_HOME='" + cache.string() + "' '" KVRT_CLI_PATH "' " +
                              args + " 2>'" + stderr_file.string() + "'";
  Output output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer{};
  size_t count;
  while ((count = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    output.text.append(buffer.data(), count);
  }
  const int status = pclose(pipe);
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  return out;
}

TEST(KvrtCli, GreedyRunJsonReturnsTheTransformersIds) {
  const fs::path err = fs::temp_directory_path() / "kvrt_cli_test_greedy.err";
  for (const char* name : {"llama_gqa", "qwen2_bias"}) {
    const fs::path dir = fs::path(source_dir()) / "tests/fixtures" / name;
    std::ifstream in(dir / "reference.json");
    ASSERT_TRUE(in) << dir;
    const auto reference = nlohmann::json::parse(in);
    const auto expected = reference["greedy_ids"].get<std::vector<int32_t>>();
    const Output output =
        run_cli("run '" + dir.string() + "' --device cpu --temperature 0 --ignore-eos --json -n " +
                    std::to_string(expected.size()) + " --prompt-ids " +
                    join_ids(reference["prompt_ids"].get<std::vector<int32_t>>()),
                err);
    ASSERT_EQ(output.exit_code, 0) << output.text;
    const auto result = nlohmann::json::parse(output.text);
    EXPECT_EQ(result["ids"].get<std::vector<int32_t>>(), expected) << name;
    EXPECT_EQ(result["cache_bytes_copied_per_step"].get<uint64_t>(), 0u);
    EXPECT_GT(result["decode_tokens_per_second"].get<double>(), 0.0);
  }
}

// G1 and G2 through the CLI: the persistence check compares the two-step decode with a
// fresh prefill of both tokens, the reference check with HF's logits.
TEST(KvrtCli, CheckPassesPersistenceAndReferenceOnAFixture) {
  const fs::path err = fs::temp_directory_path() / "kvrt_cli_test_check.err";
  const fs::path dir = fs::path(source_dir()) / "tests/fixtures/llama_gqa";
  const Output out = run_cli("check '" + dir.string() + "' --reference '" +
                                 (dir / "reference.json").string() + "' --timing-steps 2",
                             err);
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("persistence (G1): PASS"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("max |B - C|"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("all checks passed"), std::string::npos) << out.text;
}

TEST(KvrtCli, MissingModelIsAOneLineError) {
  const fs::path err = fs::temp_directory_path() / "kvrt_cli_test_missing.err";
  const Output output = run_cli("run /nonexistent/model --prompt hi", err);
  EXPECT_NE(output.exit_code, 0);
  std::ifstream in(err);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("/nonexistent/model"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

// Bad values are refused with the range in words, never a 309-digit bound, and nothing
// negative slips into an unsigned seed (-1 is llama.cpp's "random").
TEST(KvrtCli, OutOfRangeFlagsSayTheirRange) {
  const fs::path err = fs::temp_directory_path() / "kvrt_cli_test_range.err";
  std::string model = "'";
  model.append(source_dir()).append("/models/fortune-llama'");
  for (const char* flags :
       {"-n 0", "--seed -2", "--seed x", "--threads -1", "--threads 100000", "-ngl -1"}) {
    std::string args = "run ";  // appended, not chained: gcc 12 warns on the chain
    args.append(model).append(" --prompt hi ").append(flags);
    const Output output = run_cli(args, err);
    EXPECT_NE(output.exit_code, 0) << flags;
    std::ifstream in(err);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_LT(text.size(), 200u) << flags << ": " << text;
  }
}

// The README's program-file workflow: export, then run the file by a bare relative
// name from its own directory, which holds no tokenizer.json; the tokenizer comes from
// the checkpoint the file records.
TEST(KvrtCli, ProgramFileByBareNameFindsItsTokenizer) {
  const fs::path dir = fs::temp_directory_path() / "kvrt_cli_test_program";
  fs::create_directories(dir);
  const fs::path err = dir / "err.txt";
  std::string model = "'";
  model.append(source_dir()).append("/models/fortune-llama'");
  std::string export_args = "export ";
  export_args.append(model).append(" -q -o '").append((dir / "model.kvrt").string()).append("'");
  ASSERT_EQ(run_cli(export_args, err).exit_code, 0);
  std::string run_args = "run model.kvrt --device cpu --prompt hi -n 4 --json";
  const std::string command = "cd '" + dir.string() + "' && '" KVRT_CLI_PATH "' " + run_args;
  FILE* pipe = popen((command + " 2>'" + err.string() + "'").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  std::array<char, 4096> buffer{};
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    text.append(buffer.data(), n);
  }
  EXPECT_EQ(WEXITSTATUS(pclose(pipe)), 0) << text;
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  ASSERT_TRUE(json.is_object()) << text;
  EXPECT_FALSE(json.value("text", std::string()).empty()) << text;
  fs::remove_all(dir);
}

// -p "" is an empty prompt, which generates from BOS; not a missing prompt.
TEST(KvrtCli, EmptyPromptIsAPrompt) {
  const fs::path err = fs::temp_directory_path() / "kvrt_cli_test_empty.err";
  const Output output = run_cli(
      "run '" + source_dir() + "/models/fortune-llama' --device cpu -p '' -n 4 --json", err);
  EXPECT_EQ(output.exit_code, 0) << output.text;
  EXPECT_NE(output.text.find("\"ids\""), std::string::npos) << output.text;
}

}  // namespace

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// `kvrt export DIR -o DIR/model.safetensors` would replace the source checkpoint: it is
// refused in one line and the weights stay as they were.
TEST(KvrtCli, ExportIntoItsOwnCheckpointIsRefused) {
  const fs::path work = fs::temp_directory_path() / "kvrt_cli_test_own_input";
  fs::remove_all(work);
  fs::create_directories(work);
  fs::copy(fs::path(source_dir()) / "tests/fixtures/llama_gqa", work / "ckpt");
  const std::string before = read_text(work / "ckpt/model.safetensors");
  const fs::path err = work / "err";
  std::string args = "export '";  // appended, not chained: gcc 12 warns on the chain
  args.append((work / "ckpt").string()).append("' -o '");
  args.append((work / "ckpt/model.safetensors").string()).append("' -q");
  const Output output = run_cli(args, err);
  EXPECT_EQ(output.exit_code, 1);
  const std::string text = read_text(err);
  EXPECT_NE(text.find("never writes into its input"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_TRUE(read_text(work / "ckpt/model.safetensors") == before);
  fs::remove_all(work);
}

// An error about a program file names its path once, not once per layer it crossed.
TEST(KvrtCli, ProgramFileErrorsNameThePathOnce) {
  const fs::path work = fs::temp_directory_path() / "kvrt_cli_test_path_once";
  fs::remove_all(work);
  fs::create_directories(work);
  std::ofstream(work / "bad.kvrt") << "KVRTPROG but not a program";
  const fs::path err = work / "err";
  for (const std::string file : {"bad.kvrt", "missing.kvrt"}) {
    const std::string path = (work / file).string();
    std::string run = "run '", inspect = "inspect '";  // appended: gcc 12 warns on chains
    run.append(path).append("' --device cpu -p hi");
    inspect.append(path).append("'");
    for (const std::string& args : {run, inspect}) {
      const Output output = run_cli(args, err);
      EXPECT_NE(output.exit_code, 0) << args;
      const std::string text = read_text(err);
      EXPECT_EQ(count_of(text, path), 1u) << args << ": " << text;
      EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << args << ": " << text;
    }
  }
  fs::remove_all(work);
}

// Every command's numeric flags say their range in words: no 309-digit bound.
TEST(KvrtCli, OutOfRangeFlagsOfEveryCommandAreShort) {
  const fs::path err = fs::temp_directory_path() / "kvrt_cli_test_ranges.err";
  std::string model = "'";
  model.append(source_dir()).append("/models/fortune-llama'");
  const std::pair<const char*, const char*> cases[] = {{"export", "-o /tmp/x.kvrt --max-seq 0"},
                                                       {"export", "-o /tmp/x.kvrt --max-prompt -3"},
                                                       {"bench", "-r 0"},
                                                       {"bench", "-p -1"},
                                                       {"check", "--threads 100000"},
                                                       {"run", "-p hi --temperature -1"},
                                                       {"run", "-p hi --temperature 1e400"}};
  for (const auto& [command, flags] : cases) {
    std::string args = command;  // appended, not chained: gcc 12 warns on the chain
    args.append(" ").append(model).append(" ").append(flags);
    const Output output = run_cli(args, err);
    EXPECT_NE(output.exit_code, 0) << args;
    const std::string text = read_text(err);
    EXPECT_LT(text.size(), 200u) << args << ": " << text;
  }
}

}  // namespace
