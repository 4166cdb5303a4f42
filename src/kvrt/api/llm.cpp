#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <system_error>

#include "kvrt/api/export_cache.h"
#include "kvrt/api/kvrt.h"
#include "kvrt/api/model_ref.h"
#include "kvrt/api/preflight.h"
#include "kvrt/delegate/engine_delegate.h"
#include "kvrt/engine/builtin_targets.h"
#include "kvrt/engine/common/engine_target.h"
#include "kvrt/export/exporter.h"
#include "kvrt/runtime/module_model.h"

namespace kvrt {

namespace fs = std::filesystem;

struct Llm::State {
  std::string program_path;
  std::string device;
  std::string device_choice;  // which device and why ("cpu (no CUDA device: ...)")
  std::unique_ptr<runtime::ModuleModel> model;
  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<Generator> generator;
  std::vector<int32_t> eos_ids;
  GenerationDefaults generation_defaults;
  std::mutex mutex;  // serializes generate/reset: one Llm is one sequence
};

namespace {

// The KV cache dtype of programs exported for `device`: the CUDA engine keeps it in
// bf16; the CPU reference in f32.
DType cache_dtype_for(Device device) {
  return device.is_cuda() ? DType::kBF16 : DType::kF32;
}

// The cached program for a checkpoint directory, exported first when there is none.
Result<std::string> export_cached(const std::string& dir, const LoadOptions& options,
                                  Device device) {
  uint64_t limit = options.cache_limit_bytes;
  if (limit == 0) {
    KVRT_ASSIGN_OR_RETURN(limit, ExportCache::default_limit());
  }
  ExportRequest request;
  request.checkpoint_dir = dir;
  request.max_seq = options.max_seq;
  request.cache_dtype = cache_dtype_for(device);
  if (options.progress) {
    request.progress = [&](uint64_t done, uint64_t total) {
      options.progress("export", done, total);
    };
  }
  return ExportCache(options.cache_dir, limit).get_or_export(request);
}

// A program file's tokenizer.json: the option, else beside the file, else in the
// checkpoint the program was exported from (recorded in the file).
std::optional<std::string> program_tokenizer(const std::string& program_path,
                                             const runtime::Module& module,
                                             const LoadOptions& options) {
  std::vector<std::string> dirs = {fs::path(program_path).parent_path().string()};
  const nlohmann::json& producer = module.program().spec().producer;
  auto source = producer.find("checkpoint_dir");
  if (source != producer.end() && source->is_string()) {
    dirs.push_back(source->get<std::string>());
  }
  return find_tokenizer_file(options.tokenizer_path, dirs);
}

// The checkpoint directory a model came from: path itself, or for a program file the
// directory recorded at export, when it still exists.
std::optional<std::string> checkpoint_dir_of(const std::string& path,
                                             const runtime::Module& module) {
  std::error_code error;
  if (fs::is_directory(path, error)) return path;
  const nlohmann::json& producer = module.program().spec().producer;
  auto source = producer.find("checkpoint_dir");
  if (source != producer.end() && source->is_string() &&
      fs::is_directory(source->get<std::string>(), error)) {
    return source->get<std::string>();
  }
  return std::nullopt;
}

// The model's generation_config.json: a checkpoint directory's own file; for a
// program file, the settings it recorded at export (so it behaves the same wherever
// it is copied), else (an older program) its checkpoint's file if that still exists.
Result<GenerationDefaults> generation_defaults_of(const ModelLocation& location,
                                                  const runtime::Module& module,
                                                  const std::string& program_path) {
  if (location.is_program) {
    const nlohmann::json& producer = module.program().spec().producer;
    auto generation = producer.find("generation");
    if (generation != producer.end() && generation->is_object()) {
      auto config = generation->find("config");
      if (config != generation->end()) {
        const std::string source = program_path + ": producer.generation.config";
        KVRT_ASSIGN_OR_RETURN(frontend::GenerationConfig parsed,
                              frontend::parse_generation_config(*config, source));
        return generation_defaults(parsed, source);
      }
    }
  }
  if (auto dir = checkpoint_dir_of(location.path, module)) return read_generation_defaults(*dir);
  return GenerationDefaults();
}

// Runs `body`, turning an exception from below (std::filesystem, the standard library,
// an allocation) into a Status: no exception crosses the kvrt API (kvrt.h).
template <typename Body>
auto without_exceptions(std::string_view what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return allocation_failed(what, ": out of memory");
  } catch (const std::exception& error) {
    return internal_error(what, ": ", error.what());
  }
}

// The EOS ids the exporter recorded (producer.generation.eos_token_ids), each inside
// the model's vocabulary: an id beyond it would never stop generation. Without them,
// the tokenizer's EOS.
Result<std::vector<int32_t>> eos_ids_of(const runtime::Module& module, const Tokenizer* tokenizer,
                                        const std::string& program_path) {
  std::vector<int32_t> ids;
  const nlohmann::json& producer = module.program().spec().producer;
  auto generation = producer.find("generation");
  if (generation != producer.end() && generation->is_object()) {
    auto eos = generation->find("eos_token_ids");
    if (eos != generation->end() && eos->is_array()) {
      for (size_t i = 0; i < eos->size(); ++i) {
        const nlohmann::json& id = (*eos)[i];
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() >= module.vocab_size() ||
            (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX)) {
          return invalid_program("'", program_path, "': producer.generation.eos_token_ids[", i,
                                 "]: ", id.dump(), " is not a token id of the model's ",
                                 module.vocab_size(), "-token vocabulary");
        }
        ids.push_back(id.get<int32_t>());
      }
    }
  }
  if (ids.empty() && tokenizer != nullptr && tokenizer->eos_id())
    ids.push_back(*tokenizer->eos_id());
  return ids;
}

}  // namespace

Llm::Llm(std::unique_ptr<State> state) : state_(std::move(state)) {}
Llm::~Llm() = default;

Result<std::unique_ptr<Llm>> Llm::load(const std::string& path, const LoadOptions& options) {
  return without_exceptions("loading '" + path + "'",
                            [&] { return load_unguarded(path, options); });
}

Result<std::unique_ptr<Llm>> Llm::load_unguarded(const std::string& path,
                                                 const LoadOptions& options) {
  // Each CPU thread is an OS thread: a count beyond any core count is a mistake, and
  // asking the system for 100000 threads would only fail slowly.
  if (options.num_threads < 0 || options.num_threads > kMaxThreads) {
    return invalid_argument("num_threads must be in [0, ", kMaxThreads, "], got ",
                            options.num_threads);
  }
  auto state = std::make_unique<State>();
  KVRT_RETURN_IF_ERROR(engine::register_builtin_targets());
  KVRT_ASSIGN_OR_RETURN(Device device,
                        engine::resolve_device(options.device, &state->device_choice));
  // Everything that can fail is checked before the export, which can take minutes:
  // the device, the reference, the config and the tokenizer.
  KVRT_RETURN_IF_ERROR(delegate::device_api_for(device).status());
  KVRT_ASSIGN_OR_RETURN(ModelLocation location, resolve_model(path));
  if (location.is_program) {
    state->program_path = location.path;
  } else {
    KVRT_ASSIGN_OR_RETURN(
        state->tokenizer,
        preflight_checkpoint(location.path, options.tokenizer_path, options.require_tokenizer));
    KVRT_ASSIGN_OR_RETURN(state->program_path, export_cached(location.path, options, device));
  }
  state->device = device.to_string();
  runtime::ModuleOptions module_options;
  module_options.device = device;
  module_options.num_threads = options.num_threads;
  if (options.progress) options.progress("load", 0, 1);
  KVRT_ASSIGN_OR_RETURN(auto module, runtime::Module::load(state->program_path, module_options));
  if (options.progress) options.progress("load", 1, 1);
  if (location.is_program) {
    if (auto file = program_tokenizer(state->program_path, *module, options)) {
      KVRT_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(*file));
      KVRT_RETURN_IF_ERROR(
          check_tokenizer_fits(tokenizer, *file, module->vocab_size(), state->program_path));
      state->tokenizer = std::move(tokenizer);
    } else if (options.require_tokenizer) {
      return not_found("no tokenizer.json for '", state->program_path,
                       "': looked beside it and in the checkpoint it was exported from "
                       "(give it with --tokenizer FILE)");
    }
  }
  KVRT_ASSIGN_OR_RETURN(
      state->eos_ids,
      eos_ids_of(*module, state->tokenizer ? &*state->tokenizer : nullptr, state->program_path));
  KVRT_ASSIGN_OR_RETURN(state->generation_defaults,
                        generation_defaults_of(location, *module, state->program_path));
  state->model = std::make_unique<runtime::ModuleModel>(std::move(module));
  // Without a tokenizer the generator still runs on ids; text comes out empty.
  state->generator = std::make_unique<Generator>(*state->model, state->tokenizer);
  return std::unique_ptr<Llm>(new Llm(std::move(state)));
}

Result<std::vector<int32_t>> Llm::encode(std::string_view text, bool add_special_tokens) const {
  if (!state_->tokenizer) return not_found("no tokenizer.json for '", state_->program_path, "'");
  return state_->tokenizer->encode(text, add_special_tokens);
}

Result<std::string> Llm::decode(std::span<const int32_t> ids) const {
  if (!state_->tokenizer) return not_found("no tokenizer.json for '", state_->program_path, "'");
  return state_->tokenizer->decode(ids, /*skip_special_tokens=*/true);
}

namespace {

// generate_ids' body; the caller holds the Llm's mutex.
Result<GenerationResult> generate_locked(Llm::State& state, std::span<const int32_t> prompt_ids,
                                         const GenerateOptions& options,
                                         const TokenCallback& on_text);

}  // namespace

Result<GenerationResult> Llm::generate(std::string_view prompt, const GenerateOptions& options,
                                       const TokenCallback& on_text) {
  std::lock_guard lock(state_->mutex);  // one sequence: calls are serialized
  return without_exceptions("generate", [&]() -> Result<GenerationResult> {
    // BOS only at the start of a sequence; later chat turns continue it.
    KVRT_ASSIGN_OR_RETURN(auto ids, encode(prompt, state_->generator->position() == 0));
    // An empty prompt starts from BOS; a model whose tokenizer adds none has nothing to
    // condition the first token on.
    if (ids.empty() && state_->generator->position() == 0) {
      return invalid_argument(
          "empty prompt: this model's tokenizer adds no BOS token to start from; give some text");
    }
    return generate_locked(*state_, ids, options, on_text);
  });
}

Result<GenerationResult> Llm::generate_ids(std::span<const int32_t> prompt_ids,
                                           const GenerateOptions& options,
                                           const TokenCallback& on_text) {
  std::lock_guard lock(state_->mutex);
  return without_exceptions("generate",
                            [&] { return generate_locked(*state_, prompt_ids, options, on_text); });
}

namespace {

Result<GenerationResult> generate_locked(Llm::State& state, std::span<const int32_t> prompt_ids,
                                         const GenerateOptions& options,
                                         const TokenCallback& on_text) {
  if (options.eos_ids.empty() && !options.ignore_eos) {
    GenerateOptions with_eos = options;
    with_eos.eos_ids = state.eos_ids;
    return state.generator->generate(prompt_ids, with_eos, on_text);
  }
  return state.generator->generate(prompt_ids, options, on_text);
}

}  // namespace

Result<GenerationResult> Llm::generate_sequence(std::span<const int32_t> sequence,
                                                const GenerateOptions& options,
                                                const TokenCallback& on_text) {
  std::lock_guard lock(state_->mutex);
  if (options.eos_ids.empty() && !options.ignore_eos) {
    GenerateOptions with_eos = options;
    with_eos.eos_ids = state_->eos_ids;
    return state_->generator->generate_sequence(sequence, with_eos, on_text);
  }
  return state_->generator->generate_sequence(sequence, options, on_text);
}

std::vector<int32_t> Llm::tokens() const {
  std::lock_guard lock(state_->mutex);
  return state_->generator->tokens();
}

void Llm::request_stop() {
  state_->generator->request_stop();
}
Status Llm::reset() {
  std::lock_guard lock(state_->mutex);
  return state_->generator->reset();
}
bool Llm::has_tokenizer() const {
  return state_->tokenizer.has_value();
}
const std::optional<Tokenizer>& Llm::tokenizer() const {
  return state_->tokenizer;
}
const std::vector<int32_t>& Llm::eos_ids() const {
  return state_->eos_ids;
}
const GenerationDefaults& Llm::generation_defaults() const {
  return state_->generation_defaults;
}
GenerateOptions Llm::default_options(const SamplingOverrides& overrides, uint64_t seed) const {
  GenerateOptions options;
  const GenerationDefaults& defaults = state_->generation_defaults;
  options.sampling = resolve_sampling(defaults, overrides, seed);
  if (defaults.max_new_tokens && *defaults.max_new_tokens > 0) {
    options.max_new_tokens =
        static_cast<int32_t>(std::min<int64_t>(*defaults.max_new_tokens, INT32_MAX));
  }
  return options;
}
const std::string& Llm::device() const {
  return state_->device;
}
const std::string& Llm::device_choice() const {
  return state_->device_choice;
}
const std::string& Llm::program_path() const {
  return state_->program_path;
}
int32_t Llm::max_context() const {
  return state_->model->max_context();
}

}  // namespace kvrt
