// `kvrt run -i` and `kvrt chat` with a person at the keyboard: Ctrl-C stops the reply
// and the conversation goes on (it used to end the process), and a full context says how
// to go on instead of failing every later turn.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>

#include "cli_run.h"

namespace kvrt::cli_test {
namespace {

class Interactive : public CliTest {
 protected:
  // Starts kvrt with stdin and stdout on pipes, stderr in a file.
  pid_t spawn(const std::vector<std::string>& args, int* to_child, int* from_child) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      const int err = ::open((work_ / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, STDERR_FILENO);
      ::close(in[1]);
      ::close(out[0]);
      ::setenv("XDG_CACHE_HOME", (work_ / "cache").c_str(), 1);
      std::vector<char*> argv = {const_cast<char*>(KVRT_CLI_PATH)};
      for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
      argv.push_back(nullptr);
      ::execv(KVRT_CLI_PATH, argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    *to_child = in[1];
    *from_child = out[0];
    return pid;
  }
  // Reads what comes within `ms` milliseconds, until 50 ms pass without more (or,
  // with first_only, after the first piece).
  static std::string read_some(int fd, int ms, bool first_only = false) {
    std::string text;
    pollfd poll_fd{fd, POLLIN, 0};
    while (::poll(&poll_fd, 1, ms) > 0) {
      char buffer[4096];
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
      if (first_only) break;
      ms = 50;
    }
    return text;
  }
  static void say(int fd, const std::string& line) {
    EXPECT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }

  // Ctrl-C once the first reply has started; then one more turn, then /quit.
  void ctrl_c_keeps_the_conversation(const std::vector<std::string>& args) {
    ::signal(SIGPIPE, SIG_IGN);  // a child that died is reported below, not by SIGPIPE
    int to_child = -1, from_child = -1;
    const pid_t pid = spawn(args, &to_child, &from_child);
    ASSERT_GT(pid, 0);
    say(to_child, "A computer\n");
    const std::string first = read_some(from_child, 30000, /*first_only=*/true);
    ASSERT_FALSE(first.empty()) << read_text(work_ / "stderr.txt");
    ::kill(pid, SIGINT);  // mid-reply, or at the prompt if the reply was quick: both go on
    read_some(from_child, 300);
    say(to_child, "Another\n");
    const std::string second = read_some(from_child, 30000);
    say(to_child, "/quit\n");
    ::close(to_child);
    read_some(from_child, 30000);
    ::close(from_child);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status)) << "ended by a signal: " << read_text(work_ / "stderr.txt");
    EXPECT_EQ(WEXITSTATUS(status), 0) << read_text(work_ / "stderr.txt");
    EXPECT_FALSE(second.empty()) << "no reply after Ctrl-C: " << read_text(work_ / "stderr.txt");
  }
};

TEST_F(Interactive, CtrlCInRunStopsTheReplyNotTheConversation) {
  ctrl_c_keeps_the_conversation({"run", model_dir().string(), "--device", "cpu", "-i", "-n", "200",
                                 "--ignore-eos", "--temp", "0"});
}

TEST_F(Interactive, CtrlCInChatStopsTheReplyNotTheConversation) {
  ctrl_c_keeps_the_conversation(
      {"chat", model_dir().string(), "--device", "cpu", "--chat-template",
       (fs::path(source_dir()) / "tests/fixtures/serve/chat.jinja").string(), "-n", "200", "--temp",
       "0"});
}

// Turns that no longer fit the context say how to go on; /reset does.
TEST_F(Interactive, FullContextPointsAtReset) {
  const CliResult result =
      kvrt("run " + quoted(model_dir().string()) + " --device cpu -i -c 16 -n 12 --temp 0", "", {},
           "A computer is\nand then some more words\n/reset\nA computer\n");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("/reset starts over"), std::string::npos) << result.err;
  // After /reset the last turn ran.
  const size_t last = result.err.rfind("time to first token");
  const size_t advice = result.err.find("/reset starts over");
  EXPECT_GT(last, advice) << result.err;
}

}  // namespace
}  // namespace kvrt::cli_test
