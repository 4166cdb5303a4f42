// Flags shared by the commands that load a model, named as llama.cpp names them where
// the meaning is the same (-m, -c, -t, -ngl, -n, -s, --temp, --repeat-penalty, ...),
// with kvrt's earlier long names kept as aliases. Defaults show in --help.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "kvrt/api/kvrt.h"

namespace kvrt::cli {

// MODEL as the positional argument or -m/--model: a checkpoint directory, a .kvrt
// program file or a Hugging Face cache reference org/name[@revision].
struct ModelArg {
  std::string positional;
  std::string named;
  // The one given; InvalidArgument when both or neither were.
  Result<std::string> get() const;
};
void add_model_arg(CLI::App& app, ModelArg& model);

struct LoadFlags {
  std::string device = "auto";
  int gpu_layers = -1;  // -ngl; -1: not given
  int threads = 0;
  int64_t ctx_size = 0;
  std::string tokenizer;
};
// --device, -ngl/--n-gpu-layers, -t/--threads, -c/--ctx-size (alias --max-seq),
// --tokenizer.
void add_load_flags(CLI::App& app, LoadFlags& flags);
// The load options they ask for; InvalidArgument when -ngl and --device disagree.
Result<LoadOptions> load_options(const LoadFlags& flags);

struct SamplingFlags {
  int n_predict = 0;  // 0: the model's generation_config.json max_new_tokens, else below
  int fallback_n_predict = 128;
  float temperature = 0;
  int top_k = 0;
  float top_p = 1;
  float min_p = 0;
  float repeat_penalty = 1;
  std::string seed = "-1";  // -1: random, printed on stderr
  // Which of them were given on the command line (the rest come from the model).
  CLI::App* app = nullptr;
};
// -n/--n-predict (alias --max-new-tokens), --temp (alias --temperature), --top-k,
// --top-p, --min-p, --repeat-penalty (alias --repetition-penalty), -s/--seed.
void add_sampling_flags(CLI::App& app, SamplingFlags& flags);

// The options to generate with: flags given win, the model's defaults fill the rest
// (Llm::default_options). A random seed when none was given; the seed is returned in
// options.sampling.seed. InvalidArgument names a malformed --seed.
Result<GenerateOptions> generate_options(const Llm& llm, const SamplingFlags& flags);

// Resolves a model reference for commands that do not load through Llm (export,
// bench, check): the directory or file it names.
Result<std::string> resolve_model_path(const std::string& reference);

// The path MODEL/-m names (resolve_model_path); on failure prints the error for
// `command` and returns nullopt.
std::optional<std::string> model_path_or_report(const ModelArg& model, const char* command);

// "kvrt command: message" on stderr; returns 1.
int fail(const char* command, const Status& status);

}  // namespace kvrt::cli
