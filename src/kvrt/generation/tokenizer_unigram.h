// The Unigram model of tokenizer.json (SentencePiece unigram: T5, ALBERT, XLNet,
// mBART...): each word is cut into the vocabulary pieces of highest total score by a
// Viterbi pass over its bytes, as Hugging Face's Unigram::encode_optimized does.
// Characters no piece covers score min_score - 10 as unk; consecutive unknowns fuse
// into one unk, or become <0xNN> byte tokens with byte_fallback.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvrt/generation/tokenizer_model.h"

namespace kvrt::tok {

class UnigramModel final : public Model {
 public:
  // Parses the "model" object (type Unigram) at JSON path `where`: vocab as
  // [[piece, score], ...], unk_id (null or an index), byte_fallback.
  static Result<UnigramModel> parse(const Json& model, const std::string& where);

  Status tokenize(std::string_view word, std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  size_t vocab_count() const override { return pieces_.size(); }
  int32_t max_id() const override { return static_cast<int32_t>(pieces_.size()) - 1; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // A byte trie over the pieces, for the common-prefix search at each position.
  struct TrieNode {
    std::unordered_map<unsigned char, int32_t> children;
    int32_t piece = -1;  // id of the piece that ends here
  };
  // The best segmentation of word as strings, unknown runs fused.
  Result<std::vector<std::string_view>> segment(std::string_view word) const;

  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  std::vector<TrieNode> trie_;
  std::optional<int32_t> unk_id_;
  double min_score_ = 0;
  bool byte_fallback_ = false;
};

}  // namespace kvrt::tok
