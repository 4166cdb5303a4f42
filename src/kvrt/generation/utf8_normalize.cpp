// Unicode normal forms, lowercase, categories and grapheme clusters over utf8proc, a
// maintained Unicode library (Debian's libutf8proc), so the tokenizer follows the
// Unicode data of a library that is updated with each Unicode release.
#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "kvrt/generation/utf8.h"

namespace kvrt::utf8 {
namespace {

utf8proc_option_t options_of(NormalForm form) {
  const int base = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      return static_cast<utf8proc_option_t>(base | UTF8PROC_COMPOSE);
    case NormalForm::kNfd:
      return static_cast<utf8proc_option_t>(base | UTF8PROC_DECOMPOSE);
    case NormalForm::kNfkc:
      return static_cast<utf8proc_option_t>(base | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case NormalForm::kNfkd:
      return static_cast<utf8proc_option_t>(base | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return static_cast<utf8proc_option_t>(base);
}

utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

}  // namespace

std::string normalize(std::string_view input, NormalForm form) {
  std::string valid;
  if (!is_valid(input)) {
    valid = to_valid_lossy(input);
    input = valid;
  }
  // ASCII is invariant under every normal form; most prompts take this path.
  bool ascii = true;
  for (unsigned char byte : input) ascii = ascii && byte < 0x80;
  if (ascii || input.empty()) return std::string(input);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(input.data()),
                   static_cast<utf8proc_ssize_t>(input.size()), &out, options_of(form));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  // Valid UTF-8 without unassigned-code-point checks cannot fail; out of memory is the
  // only way left, and then the text is kept unchanged rather than half-normalized.
  if (length < 0) return std::string(input);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(length));
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const char32_t cp = decode(text, pos);
    if (cp < 0x80) {
      out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    } else if (cp == 0x130) {
      // The one unconditional multi-character lowercase mapping (SpecialCasing.txt),
      // which utf8proc's simple mapping reduces to "i".
      out += "i\xCC\x87";
    } else {
      append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
  }
  return out;
}

bool is_mark(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

bool is_nonspacing_mark(char32_t cp) {
  return category(cp) == UTF8PROC_CATEGORY_MN;
}

bool is_punctuation(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool is_numeric(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool is_other(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
         c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN;
}

std::vector<std::string_view> graphemes(std::string_view text) {
  std::vector<std::string_view> out;
  utf8proc_int32_t state = 0;
  size_t start = 0;
  char32_t previous = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    const char32_t cp = decode(text, pos);
    if (begin > 0 && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                                      static_cast<utf8proc_int32_t>(cp), &state)) {
      out.push_back(text.substr(start, begin - start));
      start = begin;
    }
    previous = cp;
  }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

}  // namespace kvrt::utf8
