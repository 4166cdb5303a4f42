// UTF-8 helpers for the tokenizer and the streaming decoder: strict and lossy
// decoding (lossy follows Rust's String::from_utf8_lossy, which is what Hugging Face
// tokenizers uses, so decoded text matches byte for byte), and NFC normalization.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvrt::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Decodes the code point starting at text[pos] and advances pos past it. An ill-formed
// sequence decodes as U+FFFD and pos advances past its maximal subpart (at least one
// byte), as Unicode's "substitution of maximal subparts" prescribes.
char32_t decode(std::string_view text, size_t& pos);

// Decodes the code point at text[pos] without advancing; U+FFFD when ill-formed.
char32_t peek(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of code_point (which must be a Unicode scalar value).
void append(std::string& out, char32_t code_point);

// Whether text is well-formed UTF-8.
bool is_valid(std::string_view text);

// Offset of the first ill-formed byte, or text.size() when text is well-formed.
size_t first_invalid(std::string_view text);

// text with every maximal ill-formed subpart replaced by U+FFFD.
std::string to_valid_lossy(std::string_view text);

// Length of the UTF-8 sequence that a lead byte announces (1-4), 0 for a byte that
// cannot start a sequence.
int sequence_length(unsigned char lead);

// Unicode White_Space, as Rust's char::is_whitespace.
bool is_whitespace(char32_t code_point);

// Canonical composition (NFC) of well-formed UTF-8 text. Ill-formed input is first
// made valid with to_valid_lossy.
std::string nfc(std::string_view text);

}  // namespace kvrt::utf8
