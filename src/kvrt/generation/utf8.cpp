#include "kvrt/generation/utf8.h"

namespace kvrt::utf8 {
namespace {

// The accepted range of the second byte after each lead byte (Unicode Table 3-7);
// every later continuation byte is 0x80..0xBF.
struct LeadInfo {
  int length;
  unsigned char second_min;
  unsigned char second_max;
};

LeadInfo lead_info(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Decodes at pos; returns the code point and sets consumed. Ill-formed sequences
// return kReplacementChar with consumed = length of the maximal subpart (>= 1).
char32_t decode_at(std::string_view text, size_t pos, size_t& consumed, bool& ok) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const LeadInfo info = lead_info(lead);
  ok = false;
  consumed = 1;
  if (info.length == 1) {
    ok = true;
    return lead;
  }
  if (info.length == 0) return kReplacementChar;
  char32_t code_point = lead & (0xFF >> (info.length + 1));
  for (int i = 1; i < info.length; ++i) {
    if (pos + i >= text.size()) return kReplacementChar;
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    const unsigned char min = i == 1 ? info.second_min : 0x80;
    const unsigned char max = i == 1 ? info.second_max : 0xBF;
    if (byte < min || byte > max) return kReplacementChar;
    code_point = (code_point << 6) | (byte & 0x3F);
    consumed = static_cast<size_t>(i) + 1;
  }
  ok = true;
  return code_point;
}

}  // namespace

int sequence_length(unsigned char lead) {
  return lead_info(lead).length;
}

char32_t decode(std::string_view text, size_t& pos) {
  size_t consumed = 0;
  bool ok = false;
  const char32_t code_point = decode_at(text, pos, consumed, ok);
  pos += consumed;
  return code_point;
}

char32_t peek(std::string_view text, size_t pos) {
  return decode(text, pos);
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t first_invalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t consumed = 0;
    bool ok = false;
    decode_at(text, pos, consumed, ok);
    if (!ok) return pos;
    pos += consumed;
  }
  return text.size();
}

bool is_valid(std::string_view text) {
  return first_invalid(text) == text.size();
}

std::string to_valid_lossy(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t consumed = 0;
    bool ok = false;
    decode_at(text, pos, consumed, ok);
    if (ok) {
      out.append(text.substr(pos, consumed));
    } else {
      out.append(kReplacement);
    }
    pos += consumed;
  }
  return out;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace kvrt::utf8
