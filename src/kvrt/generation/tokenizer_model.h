// The "model" of tokenizer.json: what turns one pre-tokenized word into token ids.
// Supported: BPE (tokenizer_bpe.h) and Unigram (tokenizer_unigram.h); another type is
// refused at load, naming model.type.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"

namespace kvrt::tok {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one word (well-formed UTF-8).
  virtual Status tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // The token string of id, or nullptr when no vocabulary entry has that id.
  virtual const std::string* id_to_token(int32_t id) const = 0;
  // HF's get_vocab_size(): where added tokens that are not in the vocabulary start.
  virtual size_t vocab_count() const = 0;
  // The largest id of the vocabulary (-1 when empty).
  virtual int32_t max_id() const = 0;
};

// Builds the model described by `json` at JSON path `where` ("model").
Result<std::unique_ptr<Model>> parse_model(const Json& json, const std::string& where);

}  // namespace kvrt::tok
