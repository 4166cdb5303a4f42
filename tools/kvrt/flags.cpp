#include "flags.h"

#include <charconv>
#include <cstdio>
#include <random>

#include "kvrt/api/model_ref.h"

namespace kvrt::cli {

Result<std::string> ModelArg::get() const {
  if (!positional.empty() && !named.empty()) {
    return invalid_argument("the model is given twice ('", positional, "' and -m '", named,
                            "'): give one");
  }
  if (positional.empty() && named.empty()) {
    return invalid_argument(
        "no model: give MODEL or -m MODEL (a checkpoint directory, a .kvrt "
        "file or org/name from the Hugging Face cache)");
  }
  return positional.empty() ? named : positional;
}

void add_model_arg(CLI::App& app, ModelArg& model) {
  const char* what =
      "Checkpoint directory, .kvrt program file, or org/name[@revision] from the Hugging Face "
      "cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub)";
  app.add_option("model", model.positional, what);
  app.add_option("-m,--model", model.named, "The model, as MODEL (llama.cpp's spelling)");
}

void add_load_flags(CLI::App& app, LoadFlags& flags) {
  app.add_option("--device", flags.device,
                 "auto (CUDA when this build and machine have it, else CPU), cpu, cuda or cuda:N");
  // -ngl itself is rewritten to --n-gpu-layers before parsing (main.cpp): CLI11 takes a
  // one-dash name for one letter, and would read -ngl as -n gl.
  app.add_option("--n-gpu-layers", flags.gpu_layers,
                 "-ngl N, llama.cpp's GPU layer count: 0 runs on the CPU, any other count puts "
                 "the whole model on the GPU (kvrt does not split a model between devices)")
      ->default_str("")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-t,--threads", flags.threads, "CPU engine threads (0 = one per core)")
      ->check(CLI::Range(0, 1024));
  app.add_option("-c,--ctx-size,--max-seq", flags.ctx_size,
                 "Context length (KV cache capacity) when exporting a checkpoint; 0 = the "
                 "model's, at most 2048")
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--tokenizer", flags.tokenizer,
                 "tokenizer.json or its directory (default: beside the model)");
}

Result<LoadOptions> load_options(const LoadFlags& flags) {
  LoadOptions options;
  options.device = flags.device;
  if (flags.gpu_layers >= 0) {
    const bool gpu = flags.gpu_layers > 0;
    const bool device_given = flags.device != "auto";
    if (device_given && gpu != flags.device.starts_with("cuda")) {
      return invalid_argument("-ngl ", flags.gpu_layers, " and --device ", flags.device,
                              " disagree (-ngl 0 is the CPU, any other count the GPU)");
    }
    if (!device_given) options.device = gpu ? "cuda" : "cpu";
  }
  options.num_threads = flags.threads;
  options.max_seq = flags.ctx_size;
  options.tokenizer_path = flags.tokenizer;
  return options;
}

void add_sampling_flags(CLI::App& app, SamplingFlags& flags) {
  flags.app = &app;
  app.add_option("-n,--n-predict,--max-new-tokens", flags.n_predict,
                 "Tokens to generate; -1 = until end of sequence or the context is full "
                 "(default: the model's generation_config.json max_new_tokens, else " +
                     std::to_string(flags.fallback_n_predict) + ")")
      ->default_str("model")
      ->check(CLI::Validator(
          [](std::string& value) {
            int n = 0;
            auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), n);
            const bool ok = error == std::errc() && ptr == value.data() + value.size() &&
                            (n == -1 || (n >= 1 && n <= (1 << 24)));
            return ok ? std::string() : std::string("must be -1 or in [1, 16777216]");
          },
          "INT"));
  app.add_option("--temp,--temperature", flags.temperature,
                 "Sampling temperature; 0 = greedy (default: the model's generation_config.json "
                 "as HF applies it, greedy without one)")
      ->default_str("model")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--top-k", flags.top_k, "Keep the k most likely tokens; 0 = off")
      ->default_str("model")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--top-p", flags.top_p, "Nucleus sampling mass; 1 = off")
      ->default_str("model")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-p", flags.min_p, "Minimum probability relative to the best; 0 = off")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--repeat-penalty,--repetition-penalty", flags.repeat_penalty,
                 "Repetition penalty; 1 = off")
      ->default_str("model")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("-s,--seed", flags.seed,
                 "Random seed; -1 = a random one, printed on stderr so the run can be repeated")
      ->check(CLI::Validator(
          [](std::string& value) {
            uint64_t seed = 0;
            const char* end = value.data() + value.size();
            auto [ptr, error] = std::from_chars(value.data(), end, seed);
            const bool ok = value == "-1" || (error == std::errc() && ptr == end);
            return ok ? std::string() : std::string("must be -1 or a non-negative integer");
          },
          "INT"));
}

Result<GenerateOptions> generate_options(const Llm& llm, const SamplingFlags& flags) {
  uint64_t seed = 0;
  if (flags.seed == "-1") {
    seed = std::random_device{}();
  } else {
    const char* end = flags.seed.data() + flags.seed.size();
    auto [ptr, error] = std::from_chars(flags.seed.data(), end, seed);
    if (error != std::errc() || ptr != end) {
      return invalid_argument("--seed: '", flags.seed,
                              "' is not a seed (a non-negative integer, or -1 for a random one)");
    }
  }
  SamplingOverrides user;
  CLI::App& app = *flags.app;
  if (app.count("--temp") > 0) user.temperature = flags.temperature;
  if (app.count("--top-k") > 0) user.top_k = flags.top_k;
  if (app.count("--top-p") > 0) user.top_p = flags.top_p;
  if (app.count("--min-p") > 0) user.min_p = flags.min_p;
  if (app.count("--repeat-penalty") > 0) user.repetition_penalty = flags.repeat_penalty;
  GenerateOptions options = llm.default_options(user, seed);
  if (!llm.generation_defaults().max_new_tokens) options.max_new_tokens = flags.fallback_n_predict;
  if (app.count("--n-predict") > 0) {
    options.max_new_tokens = flags.n_predict == -1 ? llm.max_context() : flags.n_predict;
  }
  return options;
}

Result<std::string> resolve_model_path(const std::string& reference) {
  KVRT_ASSIGN_OR_RETURN(ModelLocation location, resolve_model(reference));
  return location.path;
}

std::optional<std::string> model_path_or_report(const ModelArg& model, const char* command) {
  auto reference = model.get();
  if (!reference.ok()) {
    fail(command, reference.status());
    return std::nullopt;
  }
  auto path = resolve_model_path(*reference);
  if (!path.ok()) {
    fail(command, path.status());
    return std::nullopt;
  }
  return *path;
}

int fail(const char* command, const Status& status) {
  std::fprintf(stderr, "kvrt %s: %s\n", command, status.to_string().c_str());
  return 1;
}

}  // namespace kvrt::cli
