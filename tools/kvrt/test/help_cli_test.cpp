// Each command's --help reads like a man page (what it does, every option with its
// default, examples), and the completion scripts know every command and option.
#include "cli_run.h"

namespace kvrt::cli_test {
namespace {

class Help : public CliTest {};

constexpr const char* kCommands[] = {"bench",      "cache",    "chat",    "check",
                                     "completion", "export",   "inspect", "run",
                                     "serve",      "template", "tokenize"};

TEST_F(Help, EveryCommandHasADescriptionAndExamples) {
  const CliResult top = kvrt("--help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* command : kCommands) {
    EXPECT_NE(top.out.find(command), std::string::npos) << command;
    const CliResult help = kvrt(std::string(command) + " --help");
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_NE(help.out.find("Examples:"), std::string::npos) << command << "\n" << help.out;
    EXPECT_NE(help.out.find("kvrt " + std::string(command)), std::string::npos) << help.out;
  }
}

bool has_bash() {
  return std::system("command -v bash >/dev/null 2>&1") == 0;
}

// The bash script, sourced, completes commands, options and nested commands.
TEST_F(Help, BashCompletionCompletesCommandsAndOptions) {
  if (!has_bash()) GTEST_SKIP() << "no bash";
  const CliResult script = kvrt("completion bash");
  ASSERT_EQ(script.exit_code, 0) << script.err;
  std::ofstream(work_ / "kvrt.bash") << script.out;
  auto complete = [&](const std::string& words) {
    std::ofstream(work_ / "probe.sh")
        << "source " << quoted((work_ / "kvrt.bash").string()) << "\n"
        << "COMP_WORDS=(" << words << "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
        << "_kvrt; printf '%s\\n' \"${COMPREPLY[@]}\"\n";
    FILE* pipe = popen(("cd " + quoted(work_.string()) + " && bash probe.sh").c_str(), "r");
    std::string out;
    std::array<char, 4096> buffer{};
    for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
      out.append(buffer.data(), n);
    }
    pclose(pipe);
    return out;
  };
  EXPECT_EQ(complete("kvrt ru"), "run\n");
  const std::string temp = complete("kvrt run model --te");
  EXPECT_NE(temp.find("--temp\n"), std::string::npos) << temp;
  EXPECT_NE(temp.find("--temperature\n"), std::string::npos) << temp;
  EXPECT_NE(complete("kvrt run model -n").find("-ngl"), std::string::npos);
  EXPECT_NE(complete("kvrt cache l").find("list"), std::string::npos);
}

TEST_F(Help, ZshAndFishScriptsNameEveryCommand) {
  for (const char* shell : {"zsh", "fish"}) {
    const CliResult script = kvrt(std::string("completion ") + shell);
    EXPECT_EQ(script.exit_code, 0) << shell;
    for (const char* command : kCommands) {
      EXPECT_NE(script.out.find(command), std::string::npos) << shell << ": " << command;
    }
    EXPECT_NE(script.out.find("top-p"), std::string::npos) << shell;
  }
  EXPECT_NE(kvrt("completion fish").out.find("-l temp"), std::string::npos);
  EXPECT_NE(kvrt("completion tcsh").exit_code, 0);
}

}  // namespace
}  // namespace kvrt::cli_test
