#include "kvrt/jinja/text.h"

#include "kvrt/generation/utf8.h"

namespace kvrt::jinja::text {

std::u32string decode(std::string_view s) {
  std::u32string out;
  size_t pos = 0;
  while (pos < s.size()) out.push_back(utf8::decode(s, pos));
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) utf8::append(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    utf8::decode(s, pos);
    ++n;
  }
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

bool is_cased_letter(char32_t c) {
  return to_upper(c) != c || to_lower(c) != c || c == 0xdf;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (c < 0xc0) return c == 0xaa || c == 0xb5 || c == 0xba || (c >= 0xb2 && c <= 0xb3);
  return !is_space(c) && c != 0xd7 && c != 0xf7;
}

namespace {

template <typename F>
std::string map_chars(std::string_view s, F f) {
  std::u32string cps = decode(s);
  for (char32_t& c : cps) c = f(c);
  return encode(cps);
}

}  // namespace

std::string upper(std::string_view s) {
  return map_chars(s, to_upper);
}
std::string lower(std::string_view s) {
  return map_chars(s, to_lower);
}

std::string capitalize(std::string_view s) {
  std::u32string cps = decode(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? to_upper(cps[i]) : to_lower(cps[i]);
  return encode(cps);
}

std::string py_title(std::string_view s) {
  // A letter after a cased letter is lowered, any other letter is raised.
  std::u32string cps = decode(s);
  bool previous_cased = false;
  for (char32_t& c : cps) {
    const bool cased = is_cased_letter(c);
    if (cased) c = previous_cased ? to_lower(c) : to_upper(c);
    previous_cased = cased;
  }
  return encode(cps);
}

std::string jinja_title(std::string_view s) {
  // Jinja splits on ([-\s({\[<]+) and capitalizes each piece.
  std::u32string cps = decode(s);
  bool at_start = true;
  for (char32_t& c : cps) {
    const bool separator = is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator) {
      at_start = true;
    } else {
      c = at_start ? to_upper(c) : to_lower(c);
      at_start = false;
    }
  }
  return encode(cps);
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string cps = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_space(c);
  };
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t found = s.find(*sep, pos);
      if (found == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, found - pos));
      pos = found + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string cps = decode(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t end = cps.size();
      while (end > i && is_space(cps[end - 1])) --end;
      out.push_back(encode(std::u32string_view(cps).substr(i, end - i)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !is_space(cps[j])) ++j;
    out.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> splitlines(std::string_view s) {
  std::u32string cps = decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool breaks = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c ||
                        (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!breaks) continue;
    out.push_back(encode(std::u32string_view(cps).substr(start, i - start)));
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) out.push_back(encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between code points and at both ends.
    std::u32string cps = decode(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      utf8::append(out, c);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = s.find(from, pos);
    if (found == std::string_view::npos) break;
    out.append(s.substr(pos, found - pos));
    out.append(to);
    pos = found + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace kvrt::jinja::text
