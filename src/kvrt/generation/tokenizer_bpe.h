// The BPE model of tokenizer.json: vocabulary, ranked merges, and what to do with a
// character the vocabulary lacks (byte_fallback to <0xNN> tokens, else unk_token,
// fused or not, else dropped, exactly as Hugging Face tokenizers does), and the
// continuing_subword_prefix / end_of_word_suffix that WordPiece-style BPE vocabularies
// mark their pieces with.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_model.h"

namespace kvrt::tok {

class BpeModel final : public Model {
 public:
  // Parses the "model" object (type BPE) at JSON path `where`.
  static Result<BpeModel> parse(const Json& model, const std::string& where);

  // Appends the ids of one pre-tokenized word (well-formed UTF-8). Fails only when the
  // word needs unk_token and unk_token is not in the vocabulary.
  Status tokenize(std::string_view word, std::vector<int32_t>& out) const override;

  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  size_t vocab_count() const override { return vocab_.size(); }
  int32_t max_id() const override { return static_cast<int32_t>(tokens_.size()) - 1; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  Status add_unknown(std::optional<int32_t>& pending, std::vector<int32_t>& symbols) const;
  void merge_all(std::vector<int32_t>& symbols) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> tokens_;  // by id
  std::vector<bool> has_token_;      // by id: whether tokens_[id] is a vocabulary entry
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // <0xNN> token of each byte, -1 if absent
  std::optional<std::string> unk_token_;
  std::string prefix_;  // continuing_subword_prefix: marks every character but the first
  std::string suffix_;  // end_of_word_suffix: marks the last character
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

}  // namespace kvrt::tok
