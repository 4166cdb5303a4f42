// GPT-2's byte-level alphabet: every byte maps to one printable character so that a
// BPE vocabulary over characters covers all byte strings. Used by the ByteLevel
// pre-tokenizer (bytes -> characters) and the ByteLevel decoder (back to bytes).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvrt::tok {

// The byte-level character of each byte, UTF-8 encoded ("Ġ" for the space byte).
std::string_view byte_level_char(unsigned char byte);

// text with each byte replaced by its byte-level character.
std::string byte_level_encode(std::string_view text);

// The bytes a token's byte-level characters stand for, or nullopt when the token holds
// a character outside the alphabet (an added token such as "<|im_start|>" maps fine;
// one with "▁" or CJK text does not and is emitted as its own UTF-8).
std::optional<std::string> byte_level_decode(std::string_view token);

}  // namespace kvrt::tok
