// NFC normalization (canonical decomposition, canonical ordering, canonical
// composition) over tables generated from Python's unicodedata by utf8_nfc_gen.py.
// Qwen2's tokenizer.json normalizes input with NFC, so the tokenizer needs it; the
// tables keep kvrt free of an ICU dependency.
#include <algorithm>
#include <vector>

#include "kvrt/generation/utf8.h"

namespace kvrt::utf8 {
namespace {

struct CccRange {
  char32_t first;
  char32_t last;
  unsigned char ccc;
};
struct Decomposition {
  char32_t code_point;
  unsigned short offset;
  unsigned char length;
};
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

#include "kvrt/generation/utf8_nfc_data.inc"

// Hangul syllables compose and decompose algorithmically (Unicode section 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

unsigned char combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::upper_bound(std::begin(kCccRanges), std::end(kCccRanges), cp,
                             [](char32_t value, const CccRange& r) { return value < r.first; });
  if (it == std::begin(kCccRanges)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0xC0) {
    out.push_back(cp);
    return;
  }
  auto it =
      std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                       [](const Decomposition& d, char32_t value) { return d.code_point < value; });
  if (it == std::end(kDecompositions) || it->code_point != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kDecompositionData + it->offset,
             kDecompositionData + it->offset + it->length);
}

// The primary composite of (first, second), or 0 when there is none.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions),
                             Composition{first, second, 0},
                             [](const Composition& a, const Composition& b) {
                               return a.first != b.first ? a.first < b.first : a.second < b.second;
                             });
  if (it != std::end(kCompositions) && it->first == first && it->second == second) {
    return it->composite;
  }
  return 0;
}

}  // namespace

std::string nfc(std::string_view input) {
  // ASCII and text below U+0300 with no decomposable letters is already NFC; most
  // prompts take this path.
  bool may_change = false;
  for (unsigned char byte : input) {
    if (byte >= 0xC3) {
      may_change = true;
      break;
    }
  }
  std::string valid;
  if (!is_valid(input)) {
    valid = to_valid_lossy(input);
    input = valid;
  }
  if (!may_change) return std::string(input);

  std::vector<char32_t> chars;
  chars.reserve(input.size());
  for (size_t pos = 0; pos < input.size();) decompose(decode(input, pos), chars);

  // Canonical ordering: stable-sort each run of non-starters by combining class.
  for (size_t i = 0; i < chars.size();) {
    if (combining_class(chars[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < chars.size() && combining_class(chars[end]) != 0) ++end;
    std::stable_sort(chars.begin() + i, chars.begin() + end, [](char32_t a, char32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = end;
  }

  // Canonical composition: a character joins the last starter unless blocked by an
  // intervening character of the same or higher class.
  std::vector<char32_t> composed;
  composed.reserve(chars.size());
  ptrdiff_t starter = -1;
  int last_class = -1;
  for (char32_t c : chars) {
    const int cls = combining_class(c);
    if (starter >= 0 && (last_class < cls || last_class == 0)) {
      if (char32_t comp = compose(composed[starter], c); comp != 0) {
        composed[starter] = comp;
        continue;
      }
    }
    if (cls == 0) starter = static_cast<ptrdiff_t>(composed.size());
    last_class = cls;
    composed.push_back(c);
  }
  std::string out;
  out.reserve(input.size());
  for (char32_t c : composed) append(out, c);
  return out;
}

}  // namespace kvrt::utf8
