// Reading turns from a person at a terminal, for `kvrt chat` and `kvrt run -i`: line
// editing and history with libedit when built with it, and Ctrl-C that stops the reply
// being written (Llm::request_stop) or, at the prompt, asks again instead of quitting.
#pragma once

#include <optional>
#include <string>

#include "kvrt/api/kvrt.h"

namespace kvrt::cli {

// Routes SIGINT to `llm` while alive; the default action is restored on destruction.
class InterruptToStop {
 public:
  explicit InterruptToStop(Llm& llm);
  ~InterruptToStop();
  InterruptToStop(const InterruptToStop&) = delete;
  InterruptToStop& operator=(const InterruptToStop&) = delete;
};

// Whether Ctrl-C was pressed since the last call.
bool take_interrupt();

// One line of input; nullopt at end of input. `terminal`: prompt with "> " (and edit).
std::optional<std::string> read_line(bool terminal);

}  // namespace kvrt::cli
