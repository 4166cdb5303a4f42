// tokenizer.json "pre_tokenizer": cuts normalized text into the words that BPE
// tokenizes one at a time. Supported: Sequence, Split (string or regex pattern, every
// delimiter behavior, invert), ByteLevel (with or without the GPT-2 regex), Metaspace
// (prepend_scheme always/first/never, split or not), and the character-class splitters
// Whitespace, WhitespaceSplit, Punctuation, Digits and BertPreTokenizer
// (tokenizer_pre_tokenizer_chars.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"

namespace kvrt::tok {

struct Piece {
  std::string text;
  // Whether the piece starts at byte 0 of the text given to encode(); Metaspace's
  // prepend_scheme "first" adds its prefix only there.
  bool at_origin = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces every piece by its sub-pieces; empty pieces are dropped.
  virtual Status pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

// nullptr for a null pre_tokenizer (the whole segment is one word).
Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& json,
                                                          const std::string& where);

}  // namespace kvrt::tok
