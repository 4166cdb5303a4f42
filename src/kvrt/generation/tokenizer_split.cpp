#include "kvrt/generation/tokenizer_split.h"

#include <algorithm>

namespace kvrt::tok {
namespace {

struct Part {
  Span span;
  bool flag;  // is_match before the behavior is applied, "remove" after
};

}  // namespace

void split_piece(const Piece& piece, const std::vector<Span>& matches, Behavior behavior,
                 bool invert, std::vector<Piece>& out) {
  const size_t size = piece.text.size();
  std::vector<Part> parts;
  size_t prev = 0;
  for (const Span& m : matches) {
    if (prev != m.begin) parts.push_back({{prev, m.begin}, invert});
    parts.push_back({m, !invert});
    prev = m.end;
  }
  if (prev != size) parts.push_back({{prev, size}, invert});

  std::vector<Part> result;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      result = parts;
      break;
    case Behavior::kIsolated:
      for (const Part& p : parts) result.push_back({p.span, false});
      break;
    case Behavior::kContiguous:
      for (const Part& p : parts) {
        if (p.flag == previous_match && !result.empty()) {
          result.back().span.end = p.span.end;
        } else {
          result.push_back({p.span, false});
        }
        previous_match = p.flag;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.flag && !previous_match && !result.empty()) {
          result.back().span.end = p.span.end;
        } else {
          result.push_back({p.span, false});
        }
        previous_match = p.flag;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->flag && !previous_match && !result.empty()) {
          result.back().span.begin = it->span.begin;
        } else {
          result.push_back({it->span, false});
        }
        previous_match = it->flag;
      }
      std::reverse(result.begin(), result.end());
      break;
  }
  for (const Part& p : result) {
    if (p.flag || p.span.begin == p.span.end) continue;
    out.push_back({piece.text.substr(p.span.begin, p.span.end - p.span.begin),
                   piece.at_origin && p.span.begin == 0});
  }
}

Result<Behavior> parse_behavior(const Json& json, const std::string& where,
                                std::optional<Behavior> fallback) {
  if (fallback && optional_field(json, "behavior") == nullptr) return *fallback;
  KVRT_ASSIGN_OR_RETURN(std::string name, string_field(json, "behavior", where));
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return not_supported(field_path(where, "behavior"), ": unknown split behavior '", name, "'");
}

}  // namespace kvrt::tok
