#include "line_input.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#ifdef KVRT_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace kvrt::cli {

namespace {

// The handler only stores to lock-free atomics and calls request_stop(), which sets
// one: what may be done in a signal handler.
std::atomic<Llm*> g_llm{nullptr};
std::atomic<bool> g_interrupted{false};

void on_interrupt(int) {
  g_interrupted.store(true);
  if (Llm* llm = g_llm.load(); llm != nullptr) llm->request_stop();
}

}  // namespace

InterruptToStop::InterruptToStop(Llm& llm) {
  g_llm.store(&llm);
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: Ctrl-C interrupts a blocking read
  sigaction(SIGINT, &action, nullptr);
}

InterruptToStop::~InterruptToStop() {
  signal(SIGINT, SIG_DFL);
  g_llm.store(nullptr);
}

bool take_interrupt() {
  return g_interrupted.exchange(false);
}

std::optional<std::string> read_line(bool terminal) {
#ifdef KVRT_HAVE_LIBEDIT
  if (terminal) {
    char* line = readline("> ");
    if (line == nullptr) return std::nullopt;
    std::string text(line);
    std::free(line);
    if (!text.empty()) add_history(text.c_str());
    return text;
  }
#endif
  if (terminal) std::fprintf(stderr, "> ");
  // read(2), not std::getline: a read that Ctrl-C interrupts (EINTR) must be told from
  // the end of input, and std::cin reports both as end of file.
  static std::string pending;
  for (;;) {
    if (const size_t end = pending.find('\n'); end != std::string::npos) {
      std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      return line;
    }
    char buffer[4096];
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n > 0) {
      pending.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      // Ctrl-C at the prompt: ask again rather than quit.
      if (g_interrupted.exchange(false) && terminal) std::fprintf(stderr, "\n> ");
      continue;
    }
    if (pending.empty()) return std::nullopt;  // end of input (or an unreadable stdin)
    std::string line = std::move(pending);     // a last line without its newline
    pending.clear();
    return line;
  }
}

}  // namespace kvrt::cli
