// Python str semantics over UTF-8: length and slicing count code points, whitespace is
// Python's isspace(), case mapping covers ASCII, Latin-1, Greek and Cyrillic (the
// letters chat templates meet; other scripts are left as they are).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvrt::jinja::text {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
size_t length(std::string_view s);

bool is_space(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased_letter(char32_t c);
// \w in Python's re: letters, digits and '_' (non-ASCII letters approximated as any
// code point above U+007F that is neither space nor punctuation of Latin-1).
bool is_word_char(char32_t c);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);
std::string py_title(std::string_view s);     // str.title()
std::string jinja_title(std::string_view s);  // the |title filter

// str.strip/lstrip/rstrip; chars == nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split(sep, maxsplit); sep == nullopt splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
// str.splitlines() without keepends.
std::vector<std::string> splitlines(std::string_view s);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

}  // namespace kvrt::jinja::text
