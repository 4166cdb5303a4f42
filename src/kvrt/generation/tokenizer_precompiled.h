// SentencePiece's precompiled charsmap (tokenizer.json normalizer "Precompiled"), as
// Hugging Face tokenizers applies it (the spm_precompiled crate): a darts-clone double
// array over UTF-8 bytes whose values index NUL-terminated replacements. The trie is
// always decoded, also when the map is what NFKC gives, so a custom map (nmt_nfkc_cf,
// a user's own rules) normalizes as the model was trained.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt::tok {

class PrecompiledCharsmap {
 public:
  // bytes: the decoded precompiled_charsmap: a little-endian u32 trie size in bytes,
  // the trie units, then the replacement strings. `where` names the JSON field.
  static Result<PrecompiledCharsmap> parse(std::string_view bytes, std::string_view where);

  // The replacement of the shortest key that is a prefix of chunk (HF takes the first
  // match of the common-prefix search, so a longer key never wins), or nullopt.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  // HF's Precompiled normalizer: per grapheme cluster shorter than 6 bytes, its
  // transform when there is one; otherwise each character's transform, or the
  // character itself.
  std::string normalize(std::string_view text) const;

 private:
  std::vector<uint32_t> units_;
  std::string normalized_;
};

// Standard base64 (RFC 4648, with padding) as serde's base64 reads it.
Result<std::string> base64_decode(std::string_view text, std::string_view where);

}  // namespace kvrt::tok
