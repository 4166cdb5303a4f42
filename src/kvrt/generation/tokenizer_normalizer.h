// tokenizer.json "normalizer": rewrites the text between added tokens before it is
// split and tokenized. Supported: Sequence, Prepend, Replace (string or regex), NFC,
// NFD, NFKC, NFKD (utf8proc), Lowercase, Strip, StripAccents, BertNormalizer and
// Precompiled (SentencePiece's charsmap, tokenizer_precompiled.h).
// Llama 2 / TinyLlama use Sequence[Prepend("▁"), Replace(" ", "▁")]; Qwen2 uses NFC.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"

namespace kvrt::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual Result<std::string> normalize(std::string_view text) const = 0;
};

// Builds the normalizer described by `json` (at JSON path `where`); nullptr for null.
// Unknown types are NotSupported, naming the field.
Result<std::unique_ptr<Normalizer>> parse_normalizer(const Json& json, const std::string& where);

}  // namespace kvrt::tok
