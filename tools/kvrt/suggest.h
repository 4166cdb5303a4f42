// Help for mistyped command lines: "did you mean" suggestions, and llama.cpp's
// multi-letter one-dash options (-ngl, -cnv, ...) which CLI11 would otherwise read as a
// one-letter option with its value attached (-ngl 99 as -n gl).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvrt::cli {

// The candidate closest to `typed` by edit distance, when close enough to be a typo
// (at most a third of its length, and at most 3 edits) or a prefix of exactly one.
std::optional<std::string> closest(const std::string& typed,
                                   const std::vector<std::string>& candidates);

// Rewrites llama.cpp option spellings kvrt shares (-ngl → --n-gpu-layers, -sys →
// --system); returns an error message for one kvrt does not have, else nullopt.
// Arguments after "--" are left alone.
std::optional<std::string> rewrite_llama_cpp_options(std::vector<std::string>& args);

}  // namespace kvrt::cli
