// `kvrt chat` as a user runs it, with stdin from a file: several turns, /reset, /exit.
// --verbose's JSON lines say how each turn used the cache: the second turn must reuse
// the first one's tokens and prefill only what it adds.
#include <gtest/gtest.h>
#include <sys/wait.h>

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

fs::path source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return fs::path(env ? env : KVRT_SOURCE_DIR);
}

struct Output {
  int exit_code = -1;
  std::string out;
  std::vector<nlohmann::json> turns;  // --verbose lines
  std::string err;
};

Output run_chat(const std::string& input) {
  // One directory per test: CTest runs the cases of this file in parallel.
  const fs::path dir =
      fs::temp_directory_path() /
      ("kvrt_chat_cli_test_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  const fs::path in_file = dir / "input.txt";
  const fs::path err_file = dir / "stderr.txt";
  std::ofstream(in_file) << input;
  // A private export cache: the test does not depend on (or fill) the user's.
  const std::string command =
      "XDG_CACHE_HOME='" + (dir / "cache").string() + "' '" KVRT_CLI_PATH "' chat '" +
      (source_dir() / "models/fortune-llama").string() + "' --chat-template '" +
      (source_dir() / "tests/fixtures/serve/chat.jinja").string() +
      "' --device cpu --temperature 0 -n 12 --verbose <'" + in_file.string() + "' 2>'" +
      err_file.string() + "'";
  Output output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer{};
  size_t count;
  while ((count = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    output.out.append(buffer.data(), count);
  }
  const int status = pclose(pipe);
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_file);
  std::string line;
  while (std::getline(err, line)) {
    output.err += line + "\n";
    if (line.starts_with("{")) output.turns.push_back(nlohmann::json::parse(line));
  }
  return output;
}

TEST(KvrtChat, SecondTurnPrefillsOnlyWhatItAdds) {
  if (!fs::exists(source_dir() / "models/fortune-llama")) GTEST_SKIP() << "no bundled model";
  const Output o = run_chat("Tell me a fortune.\nAnother one, please.\n/exit\nnever read\n");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  ASSERT_EQ(o.turns.size(), 2u) << o.err;  // /exit ended it: the last line was not read
  const auto& first = o.turns[0];
  const auto& second = o.turns[1];
  EXPECT_EQ(first["reused_tokens"], 0);
  EXPECT_EQ(first["prefilled_tokens"], first["conversation_tokens"]);
  // Every token of the second rendering is either reused or prefilled; the reused part
  // is at least the first prompt, and when the rendering extends the cached sequence
  // (the reply re-encodes to its own tokens) it is the whole first turn but the reply's
  // last token, which was sampled and never run through the model.
  const int conversation = second["conversation_tokens"];
  const int reused = second["reused_tokens"];
  const int first_turn =
      first["conversation_tokens"].get<int>() + first["generated_tokens"].get<int>();
  EXPECT_EQ(reused + second["prefilled_tokens"].get<int>(), conversation);
  EXPECT_GE(reused, first["conversation_tokens"].get<int>());
  if (second["extended"].get<bool>()) {
    EXPECT_EQ(reused, first_turn - 1);
  }
  EXPECT_LT(second["prefilled_tokens"].get<int>(), conversation / 2);
}

TEST(KvrtChat, ResetStartsOverAndEndOfInputQuits) {
  if (!fs::exists(source_dir() / "models/fortune-llama")) GTEST_SKIP() << "no bundled model";
  const Output o = run_chat("Hello\n/help\n/reset\nHello\n");  // ends without /exit
  ASSERT_EQ(o.exit_code, 0) << o.err;
  ASSERT_EQ(o.turns.size(), 2u) << o.err;
  EXPECT_EQ(o.turns[1]["reused_tokens"], 0);
  EXPECT_EQ(o.turns[1]["conversation_tokens"], o.turns[0]["conversation_tokens"]);
  // Each reply ends with a newline; greedy: the same conversation, the same reply.
  ASSERT_EQ(o.out.size() % 2, 0u) << o.out;
  EXPECT_EQ(o.out.substr(0, o.out.size() / 2), o.out.substr(o.out.size() / 2));
  EXPECT_NE(o.err.find("/reset"), std::string::npos);  // /help printed
}

}  // namespace
