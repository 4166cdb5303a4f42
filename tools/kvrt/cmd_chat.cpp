// `kvrt chat MODEL`: talk with a model through its chat template. Each turn renders
// the whole conversation; only what the KV cache does not hold yet is prefilled
// (kvrt::serve::Conversation). /reset starts over, /exit or end of input quits, Ctrl-C
// stops the reply being written and returns to the prompt. --verbose prints one JSON
// line per turn on stderr: how many tokens were reused and how many prefilled.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "flags.h"
#include "kvrt/api/kvrt.h"
#include "kvrt/serve/completion_service.h"
#include "kvrt/serve/conversation.h"
#include "line_input.h"

namespace {

struct ChatArgs {
  kvrt::cli::ModelArg model;
  kvrt::cli::LoadFlags load;
  kvrt::cli::SamplingFlags sampling;
  std::string system;
  std::string chat_template;
  bool verbose = false;
};

int fail(const kvrt::Status& status) {
  return kvrt::cli::fail("chat", status);
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
  auto reference = args.model.get();
  if (!reference.ok()) return fail(reference.status());
  // Resolved here too: the chat template is looked for in the model's directory.
  auto model = kvrt::cli::resolve_model_path(*reference);
  if (!model.ok()) return fail(model.status());
  auto load = kvrt::cli::load_options(args.load);
  if (!load.ok()) return fail(load.status());
  load->require_tokenizer = true;
  auto llm = kvrt::Llm::load(*model, *load);
  if (!llm.ok()) return fail(llm.status());
  auto chat_template = kvrt::serve::load_chat_template(*model, args.chat_template, **llm);
  if (!chat_template.ok()) return fail(chat_template.status());
  if (!*chat_template) {
    return fail(kvrt::not_found("'", *model,
                                "' has no chat template: give one with --chat-template FILE "
                                "(or use kvrt run --interactive for plain continuation)"));
  }
  kvrt::serve::Conversation conversation(**llm, std::move(**chat_template), args.system);

  auto options = kvrt::cli::generate_options(**llm, args.sampling);
  if (!options.ok()) return fail(options.status());
  if (options->sampling.temperature > 0) {
    std::fprintf(stderr, "seed: %llu (repeat with --seed %llu)\n",
                 static_cast<unsigned long long>(options->sampling.seed),
                 static_cast<unsigned long long>(options->sampling.seed));
  }
  kvrt::cli::InterruptToStop interrupts(**llm);

  const bool terminal = isatty(STDIN_FILENO) != 0;
  if (terminal) {
    std::fprintf(stderr,
                 "kvrt chat (%s): /reset starts over, /exit or Ctrl-D quits, "
                 "Ctrl-C stops a reply.\n",
                 (*llm)->device().c_str());
  }
  int turns = 0;
  while (auto line = kvrt::cli::read_line(terminal)) {
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
    kvrt::cli::take_interrupt();
    auto turn = conversation.say(*line, *options, [](std::string_view text, int32_t) {
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
    if (kvrt::cli::take_interrupt()) std::fprintf(stderr, "(stopped)\n");
    if (args.verbose) print_turn(*turn, ++turns);
  }
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"chat", "Chat with a model through its chat template, keeping the KV cache",
     [](CLI::App& sub) {
       auto args = std::make_shared<ChatArgs>();
       args->sampling.fallback_n_predict = 512;
       kvrt::cli::add_model_arg(sub, args->model);
       sub.add_option("--system,--system-prompt", args->system, "System prompt");
       sub.add_option("--chat-template", args->chat_template,
                      "Chat template: a .jinja file, tokenizer_config.json or model directory "
                      "(default: the model's)");
       kvrt::cli::add_sampling_flags(sub, args->sampling);
       kvrt::cli::add_load_flags(sub, args->load);
       sub.add_flag("-v,--verbose", args->verbose,
                    "One JSON line per turn on stderr: tokens reused and prefilled");
       sub.footer(
           "Each turn renders the whole conversation with the chat template "
           "(tokenizer_config.json\n"
           "or chat_template.jinja); only what the KV cache does not hold yet is prefilled.\n"
           "/reset starts over, /exit or Ctrl-D quits, Ctrl-C stops a reply, /help lists these.\n"
           "Sampling and reply length default to the model's generation_config.json (kvrt run\n"
           "--help says how); a sampled chat prints its seed on stderr.\n\n"
           "Examples:\n"
           "  kvrt chat Qwen/Qwen2.5-0.5B-Instruct --system \"Answer briefly.\"\n"
           "  kvrt chat models/fortune-llama --chat-template tests/fixtures/serve/chat.jinja "
           "--temp 0.7");
       sub.callback([args] { kvrt::cli::set_exit_code(chat(*args)); });
     }});

}  // namespace
