// The "added_tokens" of tokenizer.json (special tokens such as <s> or <|im_start|>,
// and user-added ones). The input is split on them before anything else, as Hugging
// Face's AddedVocabulary does: leftmost-longest matches, non-normalized tokens on the
// raw text first, then normalized tokens on the normalized remainder, honouring
// single_word, lstrip and rstrip.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"
#include "kvrt/generation/tokenizer_model.h"
#include "kvrt/generation/tokenizer_normalizer.h"

namespace kvrt::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of the input: an added token (token_id >= 0) or normalized text.
struct Segment {
  std::string text;
  int32_t token_id = -1;
  bool at_origin = false;  // starts at byte 0 of the input
};

class AddedTokens {
 public:
  // Parses the "added_tokens" list; `normalizer` (may be null) normalizes the content of
  // tokens marked normalized, as their match happens on normalized text. Ids are
  // assigned as Hugging Face does (a token in the model vocabulary keeps its id, the
  // others are numbered from the vocabulary size on, in order); an "id" field that
  // disagrees is logged, as HF warns too. Well-formed files always agree.
  static Result<AddedTokens> parse(const Json& list, const Normalizer* normalizer,
                                   const Model& model, const std::string& where);

  // Splits text on added tokens and normalizes the text between them. Empty text
  // segments are dropped.
  Result<std::vector<Segment>> split(std::string_view text, const Normalizer* normalizer) const;

  const AddedToken* find(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;
  int32_t max_id() const { return max_id_; }

 private:
  // Tokens matched on one kind of text (raw or normalized), with their match strings.
  struct Matcher {
    std::vector<std::string> patterns;
    std::vector<size_t> token_index;                       // index into tokens_ of each pattern
    std::array<std::vector<uint32_t>, 256> by_first_byte;  // pattern indices
  };
  struct Match {
    size_t begin;
    size_t end;
    int32_t id;
  };
  std::vector<Match> find_matches(std::string_view text, const Matcher& matcher) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  Matcher raw_;
  Matcher normalized_;
  int32_t max_id_ = -1;
};

}  // namespace kvrt::tok
