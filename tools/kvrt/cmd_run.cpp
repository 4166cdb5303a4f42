// `kvrt run MODEL -p TEXT`: stream generated text to stdout, then the numbers people
// compare runtimes by (prompt length, time to first token, prefill and decode tokens
// per second, KV-cache bytes copied per step) to stderr; or one JSON object. With -i,
// plain continuation turn by turn, keeping the cache between turns.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "flags.h"
#include "kvrt/api/kvrt.h"
#include "line_input.h"

namespace {

using kvrt::cli::fail;

struct RunArgs {
  kvrt::cli::ModelArg model;
  kvrt::cli::LoadFlags load;
  kvrt::cli::SamplingFlags sampling;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false;
  bool interactive = false;
  bool prompt_given = false;
};

kvrt::Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    int32_t id = 0;
    auto [ptr, error] = std::from_chars(text.data() + begin, text.data() + end, id);
    if (error != std::errc() || ptr != text.data() + end || id < 0) {
      return kvrt::invalid_argument("--prompt-ids: '", text.substr(begin, end - begin),
                                    "' is not a token id");
    }
    ids.push_back(id);
    begin = end + 1;
  }
  return ids;
}

kvrt::Result<std::string> read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return kvrt::not_found("--file: cannot read '", path, "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void print_stats(const kvrt::Llm& llm, const kvrt::GenerationStats& stats) {
  std::fprintf(stderr,
               "\n[%s] prompt %d tokens, generated %d (stop: %s)\n"
               "time to first token %.1f ms, prefill %.1f tok/s, decode %.1f tok/s, "
               "KV-cache bytes copied per step %llu\n",
               llm.device().c_str(), stats.prompt_tokens, stats.generated_tokens,
               std::string(kvrt::stop_reason_name(stats.stop_reason)).c_str(),
               stats.time_to_first_token_ms, stats.prefill_tokens_per_second,
               stats.decode_tokens_per_second,
               static_cast<unsigned long long>(stats.cache_bytes_copied_per_step));
}

nlohmann::json stats_json(const kvrt::Llm& llm, const std::vector<int32_t>& prompt_ids,
                          const kvrt::GenerateOptions& options,
                          const kvrt::GenerationResult& result) {
  const auto& stats = result.stats;
  return {{"device", llm.device()},
          {"seed", options.sampling.seed},
          {"temperature", options.sampling.temperature},
          {"prompt_ids", prompt_ids},
          {"ids", result.ids},
          {"text", result.text},
          {"stop_reason", kvrt::stop_reason_name(stats.stop_reason)},
          {"prompt_tokens", stats.prompt_tokens},
          {"generated_tokens", stats.generated_tokens},
          {"time_to_first_token_ms", stats.time_to_first_token_ms},
          {"prefill_ms", stats.prefill_ms},
          {"decode_ms", stats.decode_ms},
          {"prefill_tokens_per_second", stats.prefill_tokens_per_second},
          {"decode_tokens_per_second", stats.decode_tokens_per_second},
          {"cache_bytes_copied_per_step", stats.cache_bytes_copied_per_step}};
}

bool write_text(std::string_view text, int32_t) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return true;
}

constexpr const char* kInteractiveHelp =
    "/reset  forget the text so far (the KV cache)\n"
    "/exit   quit (also /quit or Ctrl-D)\n"
    "/help   this list\n"
    "Ctrl-C  stop the text being written\n";

// One turn of -i.
void interactive_turn(kvrt::Llm& llm, const kvrt::GenerateOptions& options,
                      const std::string& line) {
  auto result = llm.generate(line, options, write_text);
  std::printf("\n");
  std::fflush(stdout);
  if (!result.ok()) {
    std::fprintf(stderr, "kvrt run: %s\n", result.status().to_string().c_str());
    // A turn that does not fit what is left of the context: say the way out.
    if (llm.tokens().size() > 0) {
      std::fprintf(stderr, "(the context holds %zu of %d tokens: /reset starts over)\n",
                   llm.tokens().size(), llm.max_context());
    }
    return;  // later turns still run
  }
  if (kvrt::cli::take_interrupt()) std::fprintf(stderr, "(stopped)\n");
  if (result->stats.stop_reason == kvrt::StopReason::kMaxContext) {
    std::fprintf(stderr, "(the context of %d tokens is full: /reset starts over)\n",
                 llm.max_context());
  }
  print_stats(llm, result->stats);
}

int run_interactive(kvrt::Llm& llm, const kvrt::GenerateOptions& options, const RunArgs& args) {
  kvrt::cli::InterruptToStop interrupts(llm);
  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  if (terminal) {
    std::fprintf(stderr,
                 "kvrt run -i: each line continues the text, keeping the cache. /help lists "
                 "commands; /exit or Ctrl-D quits; Ctrl-C stops a reply. (For a chat template, "
                 "use kvrt chat.)\n");
  }
  if (args.prompt_given && !args.prompt.empty()) {
    std::fwrite(args.prompt.data(), 1, args.prompt.size(), stdout);
    interactive_turn(llm, options, args.prompt);
  }
  while (auto line = kvrt::cli::read_line(terminal)) {
    if (*line == "/exit" || *line == "/quit") break;
    if (*line == "/help") {
      std::fputs(kInteractiveHelp, stderr);
      continue;
    }
    if (*line == "/reset") {
      if (auto status = llm.reset(); !status.ok()) return fail("run", status);
      if (terminal) std::fprintf(stderr, "(cleared)\n");
      continue;
    }
    if (line->starts_with("/") && line->find(' ') == std::string::npos && line->size() > 1) {
      std::fprintf(stderr, "unknown command %s (/help lists them)\n", line->c_str());
      continue;
    }
    kvrt::cli::take_interrupt();
    interactive_turn(llm, options, *line);
  }
  return 0;
}

int run(RunArgs& args) {
  auto model = args.model.get();
  if (!model.ok()) return fail("run", model.status());
  auto load = kvrt::cli::load_options(args.load);
  if (!load.ok()) return fail("run", load.status());
  if (!args.prompt_file.empty()) {
    auto text = read_prompt_file(args.prompt_file);
    if (!text.ok()) return fail("run", text.status());
    args.prompt = std::move(*text);
    args.prompt_given = true;
  }
  // Text in or out needs the tokenizer: say so before exporting, not after.
  load->require_tokenizer = args.prompt_ids.empty();
  load->progress = [last_percent = -1](std::string_view stage, uint64_t done,
                                       uint64_t total) mutable {
    if (stage != "export" || total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent) return;
    last_percent = percent;
    std::fprintf(stderr, "\rexporting weights: %3d%%%s", percent, done == total ? "\n" : "");
  };
  auto llm = kvrt::Llm::load(*model, *load);
  if (!llm.ok()) return fail("run", llm.status());
  std::fprintf(stderr, "device: %s\n", (*llm)->device_choice().c_str());

  auto options = kvrt::cli::generate_options(**llm, args.sampling);
  if (!options.ok()) return fail("run", options.status());
  options->stop_strings = args.stop;
  options->ignore_eos = args.ignore_eos;
  if (options->sampling.temperature > 0) {
    // The seed is what makes a sampled run repeatable: always say which one it was.
    std::fprintf(stderr, "seed: %llu (repeat with --seed %llu)\n",
                 static_cast<unsigned long long>(options->sampling.seed),
                 static_cast<unsigned long long>(options->sampling.seed));
  }

  if (args.interactive) return run_interactive(**llm, *options, args);

  std::vector<int32_t> prompt_ids;
  if (!args.prompt_ids.empty()) {
    auto ids = parse_ids(args.prompt_ids);
    if (!ids.ok()) return fail("run", ids.status());
    prompt_ids = std::move(*ids);
  } else {
    auto ids = (*llm)->encode(args.prompt);
    if (!ids.ok()) return fail("run", ids.status());
    prompt_ids = std::move(*ids);
  }
  if (!args.json && !args.prompt.empty())
    std::fwrite(args.prompt.data(), 1, args.prompt.size(), stdout);
  kvrt::TokenCallback stream;
  if (!args.json) stream = write_text;
  auto result = (*llm)->generate_ids(prompt_ids, *options, stream);
  if (!result.ok()) return fail("run", result.status());
  if (args.json) {
    std::printf("%s\n", stats_json(**llm, prompt_ids, *options, *result).dump().c_str());
  } else {
    std::printf("\n");
    print_stats(**llm, result->stats);
  }
  return 0;
}

constexpr const char* kFooter =
    R"(The model's own settings apply unless a flag is given: sampling from its
generation_config.json as HF transformers applies it (greedy unless do_sample is
true, then its temperature, top_k, top_p; HF's defaults 1.0, 50, 1.0 where missing),
its repetition_penalty, its max_new_tokens, and every eos_token_id. Giving --temp > 0,
--top-k, --top-p or --min-p asks for sampling. A sampled run prints its seed on stderr;
--seed N repeats it.

A checkpoint directory is exported to a program file on first use and cached
(kvrt cache list). A .kvrt file finds its tokenizer beside it, else in the checkpoint
it was exported from.

Examples:
  kvrt run models/fortune-llama -p "A computer" -n 64 --temp 0
  kvrt run -m models/fortune-llama -f prompt.txt --temp 0.7 --top-p 0.9 -s 42
  kvrt run model.kvrt -p "Once upon a time" --json
  kvrt run Qwen/Qwen2.5-0.5B -p "Hello" -ngl 99      # from the Hugging Face cache, on the GPU
  kvrt run models/fortune-llama -i                    # continue text, turn by turn)";

const bool registered = kvrt::cli::register_command(
    {"run", "Generate text from a model (checkpoint directory, .kvrt file or org/name)",
     [](CLI::App& sub) {
       auto args = std::make_shared<RunArgs>();
       kvrt::cli::add_model_arg(sub, args->model);
       auto* prompt = sub.add_option("-p,--prompt", args->prompt, "Prompt text");
       auto* file = sub.add_option("-f,--file", args->prompt_file, "Read the prompt from a file");
       auto* ids = sub.add_option("--prompt-ids", args->prompt_ids,
                                  "Prompt as token ids: 1,2,3 (no tokenizer needed)");
       auto* chat = sub.add_flag("-i,--interactive", args->interactive,
                                 "Read turns from stdin, keeping the cache (-p: the first turn)");
       auto* json = sub.add_flag("--json", args->json, "Print one JSON object: ids, text, timings");
       prompt->excludes(ids)->excludes(file);
       file->excludes(ids);
       chat->excludes(ids)->excludes(json);
       kvrt::cli::add_sampling_flags(sub, args->sampling);
       sub.add_option("--stop", args->stop, "Stop string (repeatable)");
       sub.add_flag("--ignore-eos", args->ignore_eos, "Do not stop at end-of-sequence tokens");
       kvrt::cli::add_load_flags(sub, args->load);
       sub.footer(kFooter);
       sub.callback([args, prompt, file] {
         // An empty -p "" is a prompt (generation from BOS), not a missing one.
         args->prompt_given = prompt->count() > 0;
         if (auto model = args->model.get(); !model.ok()) {
           kvrt::cli::set_exit_code(kvrt::cli::fail("run", model.status()) + 1);
           return;
         }
         if (!args->prompt_given && file->count() == 0 && args->prompt_ids.empty() &&
             !args->interactive) {
           std::fprintf(stderr, "kvrt run: give -p TEXT, -f FILE, --prompt-ids or -i\n");
           kvrt::cli::set_exit_code(2);
           return;
         }
         kvrt::cli::set_exit_code(run(*args));
       });
     }});

}  // namespace
