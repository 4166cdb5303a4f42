#include "kvrt/generation/tokenizer_precompiled.h"

#include "kvrt/generation/utf8.h"

namespace kvrt::tok {
namespace {

// darts-clone unit layout (spm_precompiled's ArrayUnitTrait).
bool has_leaf(uint32_t unit) {
  return ((unit >> 8) & 1) == 1;
}
uint32_t value(uint32_t unit) {
  return unit & ((1u << 31) - 1);
}
uint32_t label(uint32_t unit) {
  return unit & ((1u << 31) | 0xFF);
}
uint32_t offset(uint32_t unit) {
  return (unit >> 10) << ((unit & (1u << 9)) >> 6);
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

Result<std::string> base64_decode(std::string_view text, std::string_view where) {
  if (text.size() % 4 != 0)
    return invalid_argument(where, ": base64 length is not a multiple of 4");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int values[4];
    int padding = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      const bool last_group = i + 4 == text.size();
      if (c == '=' && last_group && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        values[k] = 0;
        ++padding;
        continue;
      }
      values[k] = base64_value(c);
      if (values[k] < 0 || padding > 0) {
        return invalid_argument(where, ": invalid base64 at character ", i + k);
      }
    }
    const uint32_t group =
        (static_cast<uint32_t>(values[0]) << 18) | (static_cast<uint32_t>(values[1]) << 12) |
        (static_cast<uint32_t>(values[2]) << 6) | static_cast<uint32_t>(values[3]);
    out += static_cast<char>(group >> 16);
    if (padding < 2) out += static_cast<char>((group >> 8) & 0xFF);
    if (padding < 1) out += static_cast<char>(group & 0xFF);
  }
  return out;
}

Result<PrecompiledCharsmap> PrecompiledCharsmap::parse(std::string_view bytes,
                                                       std::string_view where) {
  if (bytes.size() < 4) return invalid_argument(where, ": charsmap shorter than its header");
  auto u32_at = [&](size_t at) {
    return static_cast<uint32_t>(static_cast<unsigned char>(bytes[at])) |
           static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 8 |
           static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 16 |
           static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 3])) << 24;
  };
  const uint32_t trie_bytes = u32_at(0);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > bytes.size() - 4) {
    return invalid_argument(where, ": trie size ", trie_bytes, " does not fit the charsmap");
  }
  PrecompiledCharsmap map;
  map.units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < map.units_.size(); ++i) map.units_[i] = u32_at(4 + 4 * i);
  map.normalized_ = std::string(bytes.substr(4 + trie_bytes));
  if (!utf8::is_valid(map.normalized_)) {
    return invalid_argument(where, ": replacement strings are not UTF-8");
  }
  return map;
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  // The common-prefix search stops at its first result: HF uses only results[0].
  size_t node = offset(units_[0]);
  for (unsigned char c : chunk) {
    if (c == 0) break;
    node ^= c;
    if (node >= units_.size()) return std::nullopt;  // a corrupt map, not a match
    const uint32_t unit = units_[node];
    if (label(unit) != c) return std::nullopt;
    node ^= offset(unit);
    if (node >= units_.size()) return std::nullopt;
    if (has_leaf(unit)) {
      const size_t begin = value(units_[node]);
      if (begin > normalized_.size()) return std::nullopt;
      size_t end = normalized_.find('\0', begin);
      if (end == std::string::npos) end = normalized_.size();
      std::string_view out = std::string_view(normalized_).substr(begin, end - begin);
      // A replacement cut inside a character would not be a str in Rust; keep valid text.
      if (!utf8::is_valid(out)) return std::nullopt;
      return out;
    }
  }
  return std::nullopt;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (std::string_view grapheme : utf8::graphemes(text)) {
    if (grapheme.size() < 6) {
      if (auto replaced = transform(grapheme)) {
        out += *replaced;
        continue;
      }
    }
    for (size_t pos = 0; pos < grapheme.size();) {
      const size_t begin = pos;
      utf8::decode(grapheme, pos);
      const std::string_view part = grapheme.substr(begin, pos - begin);
      if (auto replaced = transform(part)) {
        out += *replaced;
      } else {
        out += part;
      }
    }
  }
  return out;
}

}  // namespace kvrt::tok
