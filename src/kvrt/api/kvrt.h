// kvrt's embedding API: load a model, generate text with a token callback, stop,
// reset, read stats. Everything returns Status/Result; nothing throws: a failure below
// (the file system, an allocation) comes back as a Status too.
//
//   auto llm = kvrt::Llm::load("models/fortune-llama");   // checkpoint dir or .kvrt
//   kvrt::GenerateOptions options;
//   options.max_new_tokens = 32;
//   auto result = (*llm)->generate("Once upon a time", options,
//       [](std::string_view text, int32_t) { std::cout << text << std::flush; return true; });
//   std::cout << "\n" << result->stats.decode_tokens_per_second << " tok/s\n";
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/api/generation_defaults.h"
#include "kvrt/core/result.h"
#include "kvrt/generation/generator.h"
#include "kvrt/generation/tokenizer.h"

namespace kvrt {

struct LoadOptions {
  // "auto" (CUDA when a device and the CUDA engine are present, else CPU), "cpu",
  // "cuda" or "cuda:N".
  std::string device = "auto";
  int num_threads = 0;  // CPU engine threads; 0 = one per core; at most Llm::kMaxThreads
  // tokenizer.json or a directory holding one. Empty: the checkpoint directory, or
  // for a program file the directory beside it, else the checkpoint it was exported
  // from (recorded in the file).
  std::string tokenizer_path;
  // For checkpoint directories, exported programs are cached here (default:
  // $XDG_CACHE_HOME/kvrt or ~/.cache/kvrt), keyed by the checkpoint's content and the
  // export options (export_cache.h).
  std::string cache_dir;
  // Bytes the cache may hold; past it the least recently used programs are removed.
  // 0: $KVRT_CACHE_LIMIT, else ExportCache::kDefaultLimitBytes.
  uint64_t cache_limit_bytes = 0;
  // NotFound before any export when the model has no tokenizer; without it such a
  // model loads and runs on token ids (text comes out empty).
  bool require_tokenizer = false;
  int64_t max_seq = 0;  // cache capacity when exporting; 0 = exporter default
  // Called while exporting and loading: stage ("export", "load"), done, total.
  std::function<void(std::string_view stage, uint64_t done, uint64_t total)> progress;
};

// Thread safety: one Llm is one sequence. generate(), generate_ids() and reset() from
// several threads are serialized (each call runs whole, in turn, continuing the same
// sequence); request_stop() may be called from any thread at any time. A token callback
// must not call back into its Llm other than request_stop() (it would wait on itself).
// For independent sequences use one Llm per thread. The CI runs these guarantees under
// ThreadSanitizer (.ci/run).
class Llm {
 public:
  // path: a Hugging Face checkpoint directory (exported on first use, then cached), a
  // program file from `kvrt export`, or a reference into the Hugging Face hub cache
  // (org/name[@revision], models--org--name; model_ref.h). The config and tokenizer
  // are checked before an export (preflight.h). Errors name the file and what is wrong;
  // InvalidArgument for num_threads outside [0, kMaxThreads], InvalidProgram for a
  // program whose recorded EOS ids are not token ids of the model.
  static Result<std::unique_ptr<Llm>> load(const std::string& path,
                                           const LoadOptions& options = {});
  static constexpr int kMaxThreads = 1024;

  // Encodes with the model's tokenizer (BOS added when add_special_tokens).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = true) const;
  Result<std::string> decode(std::span<const int32_t> ids) const;

  // Generates a continuation. In chat use, successive calls continue the same
  // sequence (the KV cache is kept) until reset(). options.eos_ids empty: the model's
  // EOS ids (generation_config.json, else the tokenizer's).
  Result<GenerationResult> generate(std::string_view prompt, const GenerateOptions& options,
                                    const TokenCallback& on_text = {});
  Result<GenerationResult> generate_ids(std::span<const int32_t> prompt_ids,
                                        const GenerateOptions& options,
                                        const TokenCallback& on_text = {});

  // Generates after the whole token sequence `sequence` (e.g. a rendered conversation
  // encoded without BOS added): the longest prefix it shares with tokens() is reused
  // from the KV cache and only the rest is prefilled (stats.cached_tokens says how many
  // were reused). A sequence that does not extend the cached one re-prefills from
  // where they part. InvalidArgument when it is empty or longer than the context.
  Result<GenerationResult> generate_sequence(std::span<const int32_t> sequence,
                                             const GenerateOptions& options,
                                             const TokenCallback& on_text = {});
  // The sequence the cache holds: every prompt and generated token since reset().
  std::vector<int32_t> tokens() const;

  // Thread-safe: a generate() running elsewhere stops after its current token.
  void request_stop();
  // Clears the KV cache: the next generate() starts a new sequence.
  Status reset();

  bool has_tokenizer() const;
  // The model's tokenizer (nullopt without tokenizer.json).
  const std::optional<Tokenizer>& tokenizer() const;
  const std::vector<int32_t>& eos_ids() const;
  // The checkpoint's generation_config.json settings with HF's defaults filled in
  // (HF's defaults alone when there is none); resolve_sampling() combines them with
  // what the user sets.
  const GenerationDefaults& generation_defaults() const;
  // The options to generate with when the user sets only `overrides`: the sampling of
  // resolve_sampling() (generation_config.json as HF applies it: greedy unless
  // do_sample), its max_new_tokens (else GenerateOptions' own) and `seed`. The CLI's
  // run and chat use exactly this; GenerateOptions{} alone is plain temperature-1
  // sampling and ignores the model's file.
  GenerateOptions default_options(const SamplingOverrides& overrides = {}, uint64_t seed = 0) const;
  const std::string& device() const;
  // The device and why it was chosen, e.g. "cpu (no CUDA device: ...)" for "auto".
  const std::string& device_choice() const;
  const std::string& program_path() const;
  int32_t max_context() const;

  ~Llm();
  Llm(const Llm&) = delete;
  Llm& operator=(const Llm&) = delete;

  struct State;

 private:
  explicit Llm(std::unique_ptr<State> state);
  static Result<std::unique_ptr<Llm>> load_unguarded(const std::string& path,
                                                     const LoadOptions& options);
  std::unique_ptr<State> state_;
};

}  // namespace kvrt
