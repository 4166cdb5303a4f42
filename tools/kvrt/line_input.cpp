#include "line_input.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>

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
  std::string text;
  while (!std::getline(std::cin, text)) {
    // Ctrl-C at the prompt interrupts the read: ask again rather than quit.
    if (std::cin.eof() || !g_interrupted.exchange(false)) return std::nullopt;
    std::cin.clear();
    std::fprintf(stderr, "\n> ");
  }
  return text;
}

}  // namespace kvrt::cli
