#include "kvrt/generation/tokenizer_byte_level.h"

#include <array>

#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_char;
  std::array<int, 512> char_to_byte;  // every byte-level character is below U+0200
};

// bytes_to_unicode() of GPT-2: printable Latin-1 bytes map to themselves, the other
// 68 bytes to U+0100 onwards in byte order.
const Tables& tables() {
  static const Tables instance = [] {
    Tables t;
    t.char_to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      utf8::append(t.byte_to_char[b], cp);
      t.char_to_byte[cp] = b;
    }
    return t;
  }();
  return instance;
}

}  // namespace

std::string_view byte_level_char(unsigned char byte) {
  return tables().byte_to_char[byte];
}

std::string byte_level_encode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size() * 2);
  for (unsigned char byte : text) out += t.byte_to_char[byte];
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  const Tables& t = tables();
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    const char32_t cp = utf8::decode(token, pos);
    if (cp >= t.char_to_byte.size() || t.char_to_byte[cp] < 0) return std::nullopt;
    bytes += static_cast<char>(t.char_to_byte[cp]);
  }
  return bytes;
}

}  // namespace kvrt::tok
