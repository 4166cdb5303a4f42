#include "kvrt/api/preflight.h"

#include <filesystem>
#include <system_error>

#include "kvrt/frontend/model_config.h"

namespace kvrt {

namespace fs = std::filesystem;

std::optional<std::string> find_tokenizer_file(const std::string& explicit_path,
                                               const std::vector<std::string>& dirs) {
  std::error_code error;
  if (!explicit_path.empty()) return explicit_path;  // its own errors come from loading it
  for (const std::string& dir : dirs) {
    const fs::path file = fs::path(dir.empty() ? "." : dir) / "tokenizer.json";
    if (fs::is_regular_file(file, error)) return file.string();
  }
  return std::nullopt;
}

Status check_tokenizer_fits(const Tokenizer& tokenizer, const std::string& tokenizer_path,
                            int64_t vocab_size, const std::string& vocab_source) {
  if (tokenizer.vocab_size() > vocab_size) {
    return invalid_argument("tokenizer '", tokenizer_path, "' has token ids up to ",
                            tokenizer.vocab_size() - 1, " but ", vocab_source, " has vocab_size ",
                            vocab_size, ": it is not this model's tokenizer (--tokenizer)");
  }
  return Status();
}

Result<std::optional<Tokenizer>> preflight_checkpoint(const std::string& checkpoint_dir,
                                                      const std::string& tokenizer_path,
                                                      bool require_tokenizer) {
  const std::string config_path = (fs::path(checkpoint_dir) / "config.json").string();
  std::error_code error;
  if (!fs::is_regular_file(config_path, error)) {
    return not_found("'", checkpoint_dir,
                     "' is not a checkpoint: it has no config.json (a Hugging Face model "
                     "directory or a .kvrt program file is expected)");
  }
  KVRT_ASSIGN_OR_RETURN(frontend::ModelConfig config, frontend::load_model_config(config_path));
  const auto file = find_tokenizer_file(tokenizer_path, {checkpoint_dir});
  if (!file) {
    if (!require_tokenizer) return std::optional<Tokenizer>();
    return not_found("no tokenizer.json in '", checkpoint_dir,
                     "': text needs one (give it with --tokenizer FILE)");
  }
  KVRT_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(*file));
  KVRT_RETURN_IF_ERROR(check_tokenizer_fits(tokenizer, *file, config.vocab_size, config_path));
  return std::optional<Tokenizer>(std::move(tokenizer));
}

}  // namespace kvrt
