// `kvrt chat MODEL`: talk with a model through its chat template. Each turn renders
// the whole conversation; only what the KV cache does not hold yet is prefilled
// (kvrt::serve::Conversation). /reset starts over, /exit or end of input quits, Ctrl-C
// stops the reply being written and returns to the prompt. --verbose prints one JSON
// line per turn on stderr: how many tokens were reused and how many prefilled.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "command.h"
#include "kvrt/api/kvrt.h"
#include "kvrt/serve/completion_service.h"
#include "kvrt/serve/conversation.h"

#ifdef KVRT_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace {

struct ChatArgs {
  std::string model;
  std::string system;
  std::string chat_template;
  std::string tokenizer;
  std::string device = "auto";
  int max_new_tokens = 512;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
  int threads = 0;
  int64_t max_seq = 0;
  bool verbose = false;
};

// Ctrl-C during a reply stops it; the handler only stores to lock-free atomics, which
// is what may be done in a signal handler.
kvrt::Llm* g_llm = nullptr;
std::atomic<bool> g_interrupted{false};

void on_interrupt(int) {
  g_interrupted.store(true);
  if (g_llm != nullptr) g_llm->request_stop();
}

int fail(const kvrt::Status& status) {
  std::fprintf(stderr, "kvrt chat: %s\n", status.to_string().c_str());
  return 1;
}

// One line of input: with line editing and history on a terminal, else getline.
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

void print_turn(const kvrt::serve::ChatTurn& turn, int number) {
  const auto& stats = turn.result.stats;
  nlohmann::json line = {{"turn", number},
                         {"conversation_tokens", turn.conversation_tokens},
                         {"reused_tokens", turn.reused_tokens},
                         {"prefilled_tokens", turn.prefilled_tokens},
                         {"extended", turn.extended},
                         {"generated_tokens", stats.generated_tokens},
                         {"stop_reason", kvrt::stop_reason_name(stats.stop_reason)},
                         {"time_to_first_token_ms", stats.time_to_first_token_ms},
                         {"decode_tokens_per_second", stats.decode_tokens_per_second}};
  std::fprintf(stderr, "%s\n",
               line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

int chat(const ChatArgs& args) {
  kvrt::LoadOptions load;
  load.device = args.device;
  load.tokenizer_path = args.tokenizer;
  load.num_threads = args.threads;
  load.max_seq = args.max_seq;
  auto llm = kvrt::Llm::load(args.model, load);
  if (!llm.ok()) return fail(llm.status());
  auto chat_template = kvrt::serve::load_chat_template(args.model, args.chat_template, **llm);
  if (!chat_template.ok()) return fail(chat_template.status());
  if (!*chat_template) {
    return fail(kvrt::not_found("'", args.model,
                                "' has no chat template: give one with --chat-template FILE "
                                "(or use kvrt run --interactive for plain continuation)"));
  }
  kvrt::serve::Conversation conversation(**llm, std::move(**chat_template), args.system);

  kvrt::GenerateOptions options;
  options.max_new_tokens = args.max_new_tokens;
  options.sampling.temperature = args.temperature;
  options.sampling.top_k = args.top_k;
  options.sampling.top_p = args.top_p;
  options.sampling.seed = args.seed;

  g_llm = llm->get();
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: Ctrl-C interrupts a blocking read
  sigaction(SIGINT, &action, nullptr);

  const bool terminal = isatty(STDIN_FILENO) != 0;
  if (terminal) {
    std::fprintf(stderr,
                 "kvrt chat (%s): /reset starts over, /exit or Ctrl-D quits, "
                 "Ctrl-C stops a reply.\n",
                 (*llm)->device().c_str());
  }
  int turns = 0;
  while (auto line = read_line(terminal)) {
    if (*line == "/exit" || *line == "/quit") break;
    if (*line == "/help") {
      std::fprintf(stderr,
                   "/reset  forget the conversation\n/exit   quit (also Ctrl-D)\n"
                   "Ctrl-C  stop the reply being written\n");
      continue;
    }
    if (*line == "/reset") {
      if (auto status = conversation.reset(); !status.ok()) return fail(status);
      if (terminal) std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (line->empty()) continue;
    g_interrupted.store(false);
    auto turn = conversation.say(*line, options, [](std::string_view text, int32_t) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::printf("\n");
    std::fflush(stdout);
    if (!turn.ok()) {
      std::fprintf(stderr, "kvrt chat: %s\n", turn.status().to_string().c_str());
      continue;  // the conversation is as before the turn
    }
    if (g_interrupted.exchange(false)) std::fprintf(stderr, "(stopped)\n");
    if (args.verbose) print_turn(*turn, ++turns);
  }
  g_llm = nullptr;
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"chat", "Chat with a model through its chat template, keeping the KV cache",
     [](CLI::App& sub) {
       auto args = std::make_shared<ChatArgs>();
       sub.add_option("model", args->model, "Checkpoint directory or .kvrt program")->required();
       sub.add_option("--system", args->system, "System prompt");
       sub.add_option("--chat-template", args->chat_template,
                      "Chat template: a .jinja file, tokenizer_config.json or model directory");
       sub.add_option("-n,--max-new-tokens", args->max_new_tokens, "Most tokens per reply")
           ->check(CLI::Range(1, 1 << 24));
       sub.add_option("--temperature", args->temperature, "0 = greedy")
           ->check(CLI::Range(0.0, 1e6));
       sub.add_option("--top-k", args->top_k, "Keep the k most likely tokens (0 = off)");
       sub.add_option("--top-p", args->top_p, "Nucleus sampling mass (1 = off)");
       sub.add_option("--seed", args->seed, "Random seed for sampling");
       sub.add_option("--device", args->device, "auto, cpu, cuda or cuda:N");
       sub.add_option("--tokenizer", args->tokenizer, "tokenizer.json (or its directory)");
       sub.add_option("--threads", args->threads, "CPU threads (0 = all cores)")
           ->check(CLI::Range(0, 1024));
       sub.add_option("--max-seq", args->max_seq, "Context length when exporting a checkpoint");
       sub.add_flag("-v,--verbose", args->verbose,
                    "One JSON line per turn on stderr: tokens reused and prefilled");
       sub.callback([args] { kvrt::cli::set_exit_code(chat(*args)); });
     }});

}  // namespace
