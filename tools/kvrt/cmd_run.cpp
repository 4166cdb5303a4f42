// `kvrt run MODEL --prompt TEXT`: stream generated text to stdout, then the numbers
// people compare runtimes by (prompt length, time to first token, prefill and decode
// tokens per second, KV-cache bytes copied per step) to stderr; or one JSON object.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "command.h"
#include "kvrt/api/kvrt.h"

namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  std::string tokenizer;
  std::string device = "auto";
  int max_new_tokens = 128;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false;
  bool interactive = false;
  int threads = 0;
  int64_t max_seq = 0;
  // The sampling flags given on the command line; the others come from the model.
  std::set<std::string> given;
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

int fail(const kvrt::Status& status) {
  std::fprintf(stderr, "kvrt run: %s\n", status.to_string().c_str());
  return 1;
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
                          const kvrt::GenerationResult& result) {
  const auto& stats = result.stats;
  return {{"device", llm.device()},
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

int run_interactive(kvrt::Llm& llm, const kvrt::GenerateOptions& options) {
  std::fprintf(stderr, "kvrt chat: type a message; /reset starts over; Ctrl-D quits.\n");
  std::string line;
  while (std::fprintf(stderr, "> "), std::getline(std::cin, line)) {
    if (line == "/reset") {
      if (auto status = llm.reset(); !status.ok()) return fail(status);
      continue;
    }
    auto result = llm.generate(line, options, [](std::string_view text, int32_t) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    if (!result.ok()) {
      std::fprintf(stderr, "kvrt run: %s\n", result.status().to_string().c_str());
      continue;  // the session stays usable
    }
    print_stats(llm, result->stats);
  }
  return 0;
}

int run(const RunArgs& args) {
  kvrt::LoadOptions load;
  load.device = args.device;
  load.tokenizer_path = args.tokenizer;
  load.num_threads = args.threads;
  load.max_seq = args.max_seq;
  load.progress = [last_percent = -1](std::string_view stage, uint64_t done,
                                      uint64_t total) mutable {
    if (stage != "export" || total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent) return;
    last_percent = percent;
    std::fprintf(stderr, "\rexporting weights: %3d%%%s", percent, done == total ? "\n" : "");
  };
  auto llm = kvrt::Llm::load(args.model, load);
  if (!llm.ok()) return fail(llm.status());
  std::fprintf(stderr, "device: %s\n", (*llm)->device_choice().c_str());

  kvrt::GenerateOptions options;
  options.max_new_tokens = args.max_new_tokens;
  // Flags win; the rest comes from generation_config.json as HF applies it.
  kvrt::SamplingOverrides user;
  if (args.given.contains("--temperature")) user.temperature = args.temperature;
  if (args.given.contains("--top-k")) user.top_k = args.top_k;
  if (args.given.contains("--top-p")) user.top_p = args.top_p;
  if (args.given.contains("--min-p")) user.min_p = args.min_p;
  if (args.given.contains("--repetition-penalty"))
    user.repetition_penalty = args.repetition_penalty;
  options.sampling = kvrt::resolve_sampling((*llm)->generation_defaults(), user, args.seed);
  options.stop_strings = args.stop;
  options.ignore_eos = args.ignore_eos;

  if (args.interactive) return run_interactive(**llm, options);

  std::vector<int32_t> prompt_ids;
  if (!args.prompt_ids.empty()) {
    auto ids = parse_ids(args.prompt_ids);
    if (!ids.ok()) return fail(ids.status());
    prompt_ids = std::move(*ids);
  } else {
    auto ids = (*llm)->encode(args.prompt);
    if (!ids.ok()) return fail(ids.status());
    prompt_ids = std::move(*ids);
  }
  if (!args.json && !args.prompt.empty())
    std::fwrite(args.prompt.data(), 1, args.prompt.size(), stdout);
  kvrt::TokenCallback stream;
  if (!args.json) {
    stream = [](std::string_view text, int32_t) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  auto result = (*llm)->generate_ids(prompt_ids, options, stream);
  if (!result.ok()) return fail(result.status());
  if (args.json) {
    std::printf("%s\n", stats_json(**llm, prompt_ids, *result).dump().c_str());
  } else {
    std::printf("\n");
    print_stats(**llm, result->stats);
  }
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"run", "Generate text from a checkpoint directory or program file", [](CLI::App& sub) {
       auto args = std::make_shared<RunArgs>();
       sub.add_option("model", args->model, "Checkpoint directory or .kvrt program")->required();
       auto* prompt = sub.add_option("-p,--prompt", args->prompt, "Prompt text");
       auto* ids = sub.add_option("--prompt-ids", args->prompt_ids, "Prompt as ids: 1,2,3");
       auto* chat = sub.add_flag("-i,--interactive", args->interactive,
                                 "Chat: read turns from stdin, keeping the cache");
       prompt->excludes(ids);
       chat->excludes(ids);
       sub.add_option("-n,--max-new-tokens", args->max_new_tokens, "Tokens to generate")
           ->check(CLI::Range(1, 1 << 24));
       sub.add_option("--temperature", args->temperature, "0 = greedy")
           ->check(CLI::Range(0.0, 1e6));
       sub.add_option("--top-k", args->top_k, "Keep the k most likely tokens (0 = off)");
       sub.add_option("--top-p", args->top_p, "Nucleus sampling mass (1 = off)");
       sub.add_option("--min-p", args->min_p, "Minimum probability relative to the best");
       sub.add_option("--repetition-penalty", args->repetition_penalty, "1 = off");
       sub.add_option("--seed", args->seed, "Random seed for sampling")
           ->check(CLI::Validator(
               [](std::string& value) {
                 return value.starts_with("-") ? std::string("must be a non-negative integer")
                                               : std::string();
               },
               "UINT"));
       sub.add_option("--stop", args->stop, "Stop string (repeatable)");
       sub.add_flag("--ignore-eos", args->ignore_eos, "Do not stop at end-of-sequence tokens");
       sub.add_option("--device", args->device, "auto, cpu, cuda or cuda:N");
       sub.add_option("--tokenizer", args->tokenizer, "tokenizer.json (or its directory)");
       sub.add_option("--threads", args->threads, "CPU threads (0 = all cores)")
           ->check(CLI::Range(0, 1024));
       sub.add_option("--max-seq", args->max_seq, "Context length when exporting a checkpoint");
       sub.add_flag("--json", args->json, "Print one JSON object: ids, text, timings");
       sub.footer(
           "Sampling: flags given here win. Otherwise the model's generation_config.json "
           "applies as in HF transformers: greedy unless do_sample is true, then its "
           "temperature, top_k, top_p (HF defaults 1.0, 50, 1.0 where missing); its "
           "repetition_penalty always; every eos_token_id (one or a list) stops.");
       sub.callback([args, prompt, app = &sub] {
         for (const char* flag :
              {"--temperature", "--top-k", "--top-p", "--min-p", "--repetition-penalty"}) {
           if (app->count(flag) > 0) args->given.insert(flag);
         }
         // An empty -p "" is a prompt (generation from BOS), not a missing one.
         if (prompt->count() == 0 && args->prompt_ids.empty() && !args->interactive) {
           std::fprintf(stderr, "kvrt run: give --prompt, --prompt-ids or --interactive\n");
           kvrt::cli::set_exit_code(2);
           return;
         }
         kvrt::cli::set_exit_code(run(*args));
       });
     }});

}  // namespace
