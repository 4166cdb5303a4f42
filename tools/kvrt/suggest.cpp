#include "suggest.h"

#include <algorithm>
#include <utility>

namespace kvrt::cli {

namespace {

// Edits between a and b, a swap of two neighbours counting as one ("chta" is one
// from "chat"): the optimal string alignment distance.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// llama.cpp options of several letters after one dash. Those kvrt has are rewritten to
// its name; the others are refused by name rather than misread.
struct LlamaOption {
  const char* spelling;
  const char* kvrt;  // nullptr: kvrt has no such option
  const char* why;   // for those kvrt lacks
};
constexpr LlamaOption kLlamaOptions[] = {
    {"-ngl", "--n-gpu-layers", nullptr},
    {"-sys", "--system", nullptr},
    {"-cnv", nullptr, "for a conversation use `kvrt chat MODEL`"},
    {"-hf", nullptr, "kvrt does not download; give org/name of a model in the Hugging Face cache"},
    {"-hfr", nullptr, "kvrt does not download; give org/name of a model in the Hugging Face cache"},
    {"-fa", nullptr, "kvrt's attention kernels are always fused"},
    {"-ctk", nullptr, "the KV cache dtype is set at export (kvrt export --cache-dtype)"},
    {"-ctv", nullptr, "the KV cache dtype is set at export (kvrt export --cache-dtype)"},
    {"-ub", nullptr, "kvrt has no micro-batch size"},
    {"-np", nullptr, "kvrt serve runs one request at a time (--queue)"},
    {"-ns", nullptr, "kvrt has no multi-sequence mode"},
    {"-tb", nullptr, "use -t/--threads"},
    {"-sm", nullptr, "kvrt does not split a model between devices"},
    {"-mg", nullptr, "use --device cuda:N"},
    {"-ts", nullptr, "kvrt does not split a model between devices"},
    {"-nkvo", nullptr, "the KV cache stays on the engine's device"},
    {"-dev", nullptr, "use --device cpu|cuda|cuda:N"},
    {"-ot", nullptr, "kvrt does not split a model between devices"},
    {"-mli", nullptr, "kvrt run -i reads one line per turn"},
};

}  // namespace

std::optional<std::string> closest(const std::string& typed,
                                   const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = SIZE_MAX;
  std::vector<std::string> prefixed;
  for (const std::string& candidate : candidates) {
    if (candidate.starts_with(typed) && typed.size() >= 2) prefixed.push_back(candidate);
    const size_t distance = edit_distance(typed, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  const size_t allowed = std::min<size_t>(3, std::max<size_t>(1, typed.size() / 3));
  if (best && best_distance <= allowed) return best;
  if (prefixed.size() == 1) return prefixed.front();
  return std::nullopt;
}

std::optional<std::string> rewrite_llama_cpp_options(std::vector<std::string>& args) {
  for (std::string& arg : args) {
    if (arg == "--") break;
    for (const LlamaOption& option : kLlamaOptions) {
      if (arg != option.spelling) continue;
      if (option.kvrt != nullptr) {
        arg = option.kvrt;
      } else {
        return "'" + arg + "' is a llama.cpp option kvrt does not have: " + option.why;
      }
    }
  }
  return std::nullopt;
}

}  // namespace kvrt::cli
