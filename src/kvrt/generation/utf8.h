// UTF-8 helpers for the tokenizer and the streaming decoder: strict and lossy
// decoding (lossy follows Rust's String::from_utf8_lossy, which is what Hugging Face
// tokenizers uses, so decoded text matches byte for byte), and the Unicode data the
// normalizers and pre-tokenizers need (normal forms, case, categories, graphemes),
// taken from utf8proc rather than hand-made tables.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// The normal form of text. Ill-formed input is first made valid with to_valid_lossy.
std::string normalize(std::string_view text, NormalForm form);
inline std::string nfc(std::string_view text) {
  return normalize(text, NormalForm::kNfc);
}

// Each character replaced by its full lowercase mapping, character by character, as
// Rust's char::to_lowercase (so U+0130 becomes "i\u0307" and a final sigma stays σ).
std::string lowercase(std::string_view text);

// General categories, as Rust's char methods and the unicode_categories crate use them.
bool is_mark(char32_t code_point);             // Mn, Mc, Me (is_combining_mark)
bool is_nonspacing_mark(char32_t code_point);  // Mn
bool is_punctuation(char32_t code_point);      // Pc Pd Ps Pe Pi Pf Po
bool is_numeric(char32_t code_point);          // Nd Nl No (char::is_numeric)
bool is_other(char32_t code_point);            // Cc Cf Cs Co Cn

// The extended grapheme clusters of well-formed text (UAX #29), as byte ranges.
std::vector<std::string_view> graphemes(std::string_view text);

}  // namespace kvrt::utf8
