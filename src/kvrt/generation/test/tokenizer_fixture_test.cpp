// Reference cases produced by Hugging Face `tokenizers` (scripts/reference/
// make_tokenizer_refs.py): every case must encode, decode and stream-decode exactly as
// HF does. The fixtures live in tests/fixtures/tokenizers/<kind>/{tokenizer.json,
// cases.json} under KVRT_SOURCE_DIR (the environment variable overrides the build's
// value); a test skips while its fixture directory does not exist.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kvrt/generation/tokenizer.h"

namespace kvrt {
namespace {

namespace fs = std::filesystem;

fs::path fixtures_root() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  const fs::path source =
      env != nullptr && *env != '\0' ? fs::path(env) : fs::path(KVRT_SOURCE_DIR);
  return source / "tests" / "fixtures" / "tokenizers";
}

std::string stream_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                          bool skip_special) {
  StreamDecoder stream(tokenizer, skip_special);
  std::string text;
  for (int32_t id : ids) {
    auto piece = stream.push(id);
    EXPECT_TRUE(piece.ok()) << piece.status().to_string();
    if (piece.ok()) text += *piece;
  }
  auto rest = stream.flush();
  EXPECT_TRUE(rest.ok());
  if (rest.ok()) text += *rest;
  return text;
}

// Checks every case of one fixture directory; reports at most a few failing cases in
// full so that a systematic bug does not flood the log.
void check_fixture_dir(const fs::path& dir) {
  SCOPED_TRACE(dir.string());
  auto tokenizer = Tokenizer::load(dir.string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  std::ifstream in(dir / "cases.json");
  ASSERT_TRUE(in.good()) << "missing cases.json";
  nlohmann::json cases = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(cases.is_array()) << "cases.json is not a JSON list";
  ASSERT_FALSE(cases.empty());
  int failures = 0;
  for (size_t i = 0; i < cases.size() && failures < 10; ++i) {
    const auto& c = cases[i];
    const std::string text = c.at("text").get<std::string>();
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const auto ids_with_special = c.at("ids_with_special").get<std::vector<int32_t>>();
    const std::string decoded = c.at("decoded").get<std::string>();
    const std::string label = "case " + std::to_string(i) + " " + nlohmann::json(text).dump();
    auto encoded = tokenizer->encode(text, false);
    auto encoded_special = tokenizer->encode(text, true);
    auto text_back = tokenizer->decode(ids, false);
    auto skipped = tokenizer->decode(ids_with_special, true);
    if (!encoded.ok() || !encoded_special.ok() || !text_back.ok() || !skipped.ok()) {
      ADD_FAILURE() << label << ": an operation failed";
      ++failures;
      continue;
    }
    const bool ok = *encoded == ids && *encoded_special == ids_with_special &&
                    *text_back == decoded && stream_decode(*tokenizer, ids, false) == decoded &&
                    stream_decode(*tokenizer, ids_with_special, true) == *skipped;
    if (!ok) {
      ++failures;
      EXPECT_EQ(*encoded, ids) << label;
      EXPECT_EQ(*encoded_special, ids_with_special) << label;
      EXPECT_EQ(*text_back, decoded) << label;
      EXPECT_EQ(stream_decode(*tokenizer, ids, false), decoded) << label;
      EXPECT_EQ(stream_decode(*tokenizer, ids_with_special, true), *skipped) << label;
    }
  }
}

void check_kind(const std::string& kind) {
  const fs::path dir = fixtures_root() / kind;
  if (!fs::exists(dir / "tokenizer.json")) GTEST_SKIP() << dir << " does not exist yet";
  check_fixture_dir(dir);
}

TEST(TokenizerFixtures, ByteLevelBpeMatchesHuggingFace) {
  check_kind("byte_bpe");
}

TEST(TokenizerFixtures, SentencePieceBpeMatchesHuggingFace) {
  check_kind("sentencepiece_bpe");
}

// Any further fixture directory (for example one made from a real model's
// tokenizer.json) is checked the same way.
TEST(TokenizerFixtures, EveryOtherFixtureDirMatchesHuggingFace) {
  const std::set<std::string> named = {"byte_bpe", "sentencepiece_bpe"};
  std::vector<fs::path> dirs;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(fixtures_root(), error)) {
    if (entry.is_directory() && !named.contains(entry.path().filename().string()) &&
        fs::exists(entry.path() / "cases.json")) {
      dirs.push_back(entry.path());
    }
  }
  if (dirs.empty()) GTEST_SKIP() << "no other fixture directories";
  for (const fs::path& dir : dirs) check_fixture_dir(dir);
}

}  // namespace
}  // namespace kvrt
