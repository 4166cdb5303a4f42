#include "kvrt/frontend/checkpoint.h"

#include <filesystem>
#include <utility>
#include <vector>

namespace kvrt::frontend {

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return not_found("checkpoint '", dir, "' is not a directory");
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  KVRT_ASSIGN_OR_RETURN(checkpoint.config_,
                        load_model_config((fs::path(dir) / "config.json").string()));
  const fs::path generation = fs::path(dir) / "generation_config.json";
  if (fs::exists(generation, error)) {
    KVRT_ASSIGN_OR_RETURN(checkpoint.generation_, load_generation_config(generation.string()));
    // Special tokens outside the vocabulary: EOS would never stop generation, BOS would
    // index past the embedding table.
    const GenerationConfig& gen = checkpoint.generation_;
    const int64_t vocab = checkpoint.config_.vocab_size;
    std::vector<std::pair<const char*, int64_t>> ids;
    if (gen.bos_token_id) ids.emplace_back("bos_token_id", *gen.bos_token_id);
    for (int64_t id : gen.eos_token_ids) ids.emplace_back("eos_token_id", id);
    for (const auto& [key, id] : ids) {
      if (id < 0 || id >= vocab) {
        return invalid_argument(generation.string(), ": field '", key, "': token id ", id,
                                " is outside the vocabulary (", vocab, " tokens)");
      }
    }
  }
  GenerationConfig& gen = checkpoint.generation_;
  if (!gen.bos_token_id) gen.bos_token_id = checkpoint.config_.bos_token_id;
  if (gen.eos_token_ids.empty()) gen.eos_token_ids = checkpoint.config_.eos_token_ids;
  KVRT_ASSIGN_OR_RETURN(checkpoint.weights_, WeightIndex::open_dir(dir));
  return checkpoint;
}

Result<graph::Graph> Checkpoint::build_graph(const BuildOptions& options) const {
  return build_llama_graph(config_, weights_, options);
}

}  // namespace kvrt::frontend
