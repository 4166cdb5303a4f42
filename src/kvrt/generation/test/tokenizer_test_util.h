// Helpers shared by the tokenizer tests: the hand-built tokenizer.json files in
// test/data and a way to patch them before loading.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "kvrt/generation/tokenizer.h"

namespace kvrt::testing {

inline std::filesystem::path test_data(const std::string& name) {
  return std::filesystem::path(KVRT_SOURCE_DIR) / "src/kvrt/generation/test/data" / name;
}

inline nlohmann::json read_json(const std::string& name) {
  std::ifstream in(test_data(name));
  return nlohmann::json::parse(in);
}

// Loads test/data/<name> after `patch` edited its JSON.
inline Result<Tokenizer> load_patched(const std::string& name,
                                      const std::function<void(nlohmann::json&)>& patch) {
  nlohmann::json json = read_json(name);
  patch(json);
  return Tokenizer::from_json(json.dump(), name);
}

inline std::string stream_all(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                              std::vector<std::string>* pieces = nullptr) {
  StreamDecoder stream(tokenizer);
  std::string text;
  for (int32_t id : ids) {
    auto piece = stream.push(id);
    EXPECT_TRUE(piece.ok()) << piece.status().to_string();
    if (!piece.ok()) continue;
    if (pieces != nullptr) pieces->push_back(*piece);
    text += *piece;
  }
  auto rest = stream.flush();
  EXPECT_TRUE(rest.ok());
  if (pieces != nullptr) pieces->push_back(*rest);
  return text + *rest;
}

}  // namespace kvrt::testing
