// The tokenizer components on cases whose expected values come from the Rust source of
// Hugging Face tokenizers (its own unit tests where it has one), mostly where
// transformers.js, the differential test's reference, behaves differently.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kvrt/generation/test/tokenizer_test_util.h"
#include "kvrt/generation/tokenizer.h"
#include "kvrt/generation/tokenizer_normalizer.h"
#include "kvrt/generation/tokenizer_pre_tokenizer.h"
#include "kvrt/generation/tokenizer_precompiled.h"

namespace kvrt {
namespace {

using nlohmann::json;

std::string normalize(const json& spec, const std::string& text) {
  auto normalizer = tok::parse_normalizer(spec, "normalizer");
  EXPECT_TRUE(normalizer.ok()) << normalizer.status().to_string();
  auto out = (*normalizer)->normalize(text);
  EXPECT_TRUE(out.ok());
  return *out;
}

std::vector<std::string> pre_tokenize(const json& spec, const std::string& text) {
  auto pre = tok::parse_pre_tokenizer(spec, "pre_tokenizer");
  EXPECT_TRUE(pre.ok()) << pre.status().to_string();
  std::vector<tok::Piece> pieces = {{text, true}};
  EXPECT_TRUE((*pre)->pre_tokenize(pieces).ok());
  std::vector<std::string> out;
  for (const auto& piece : pieces) out.push_back(piece.text);
  return out;
}

Tokenizer from_model(const json& model, const json& pre_tokenizer = nullptr) {
  json file = {{"model", model}, {"pre_tokenizer", pre_tokenizer}};
  auto tokenizer = Tokenizer::from_json(file.dump(), "test.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  return *tokenizer;
}

std::vector<int32_t> encode(const Tokenizer& tokenizer, const std::string& text) {
  auto ids = tokenizer.encode(text, false);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

// models/unigram/model.rs, the doc example of Unigram::encode.
json unigram_abcd() {
  return json::parse(R"({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", 0.0],
      ["b", 0.0], ["c", 0.0], ["d", 0.0], ["cd", 1.0], ["ab", 2.0], ["abc", 5.0],
      ["abcd", 10.0]]})");
}

TEST(UnigramModel, ViterbiPicksTheBestScoringSegmentationAndFusesUnknowns) {
  // "abcdacdxx" -> ["abcd", "a", "cd", "xx"] with "xx" one unk.
  EXPECT_EQ(encode(from_model(unigram_abcd()), "abcdacdxx"), (std::vector<int32_t>{8, 1, 5, 0}));
}

TEST(UnigramModel, ByteFallbackSpellsAnUnknownRunInBytes) {
  json model = unigram_abcd();
  model["byte_fallback"] = true;
  model["vocab"].push_back(json::array({"<0xC3>", -1.0}));
  model["vocab"].push_back(json::array({"<0xA9>", -1.0}));
  // "é" has no piece; its bytes C3 A9 have tokens 9 and 10.
  EXPECT_EQ(encode(from_model(model), "aé"), (std::vector<int32_t>{1, 9, 10}));
  // A run with a byte that has no token falls back to unk as a whole.
  EXPECT_EQ(encode(from_model(model), "éx"), (std::vector<int32_t>{0}));
}

TEST(UnigramModel, UnknownCharacterWithoutUnkIdIsAnError) {
  json model = unigram_abcd();
  model["unk_id"] = nullptr;
  auto ids = from_model(model).encode("ax", false);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("unk_id"), std::string::npos);
}

TEST(BpeModel, ContinuingSubwordPrefixMarksInnerCharactersAndMergesDropIt) {
  // models/bpe/model.rs test_bpe_with_continuing_subword_prefix.
  const json model = json::parse(R"({"type": "BPE", "unk_token": "[UNK]",
      "continuing_subword_prefix": "##",
      "vocab": {"a": 0, "##b": 1, "##c": 2, "ab": 3, "abc": 4, "[UNK]": 5},
      "merges": [["a", "##b"], ["ab", "##c"]]})");
  const Tokenizer tokenizer = from_model(model);
  EXPECT_EQ(encode(tokenizer, "ab"), (std::vector<int32_t>{3}));
  EXPECT_EQ(encode(tokenizer, "abc"), (std::vector<int32_t>{4}));
  EXPECT_EQ(encode(tokenizer, "acb"), (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(encode(tokenizer, "b"), (std::vector<int32_t>{5}));  // "b" alone is not "##b"
}

TEST(BpeModel, EndOfWordSuffixMarksTheLastCharacter) {
  const json model = json::parse(R"({"type": "BPE", "end_of_word_suffix": "</w>",
      "vocab": {"a": 0, "b": 1, "b</w>": 2, "ab</w>": 3}, "merges": [["a", "b</w>"]]})");
  const Tokenizer tokenizer = from_model(model, {{"type", "WhitespaceSplit"}});
  EXPECT_EQ(encode(tokenizer, "ab b ba"), (std::vector<int32_t>{3, 2, 1}));  // "a</w>" is unknown
}

TEST(Normalizers, LowercaseIsCharByCharWithFullMappings) {
  // char::to_lowercase: İ -> "i̇" (two chars), Σ -> σ even at the end of a word.
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "İSTANBUL ΟΔΟΣ"), "i\u0307stanbul οδοσ");
}

TEST(Normalizers, StripUsesRustWhitespace) {
  // U+0085 is White_Space, U+FEFF is not.
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                      "\u0085 x \uFEFF"),
            "x \uFEFF");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, " x "),
            " x");
}

TEST(Normalizers, NormalFormsComeFromUtf8proc) {
  EXPECT_EQ(normalize({{"type", "NFD"}}, "\u00E9"), "e\u0301");
  EXPECT_EQ(normalize({{"type", "NFC"}}, "e\u0301"), "\u00E9");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\uFB01\uFF21\u00BD"), "fiA1\u20442");
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\u1E9B\u0323"), "s\u0323\u0307");
}

TEST(Normalizers, StripAccentsDropsEveryCombiningMarkWithoutDecomposing) {
  EXPECT_EQ(normalize({{"type", "StripAccents"}}, "e\u0301\u0903x\u00E9"), "ex\u00E9");
}

TEST(Normalizers, BertNormalizerCleansSpacesOutIdeographsStripsAndLowercases) {
  const json bert = {{"type", "BertNormalizer"},
                     {"clean_text", true},
                     {"handle_chinese_chars", true},
                     {"strip_accents", nullptr},
                     {"lowercase", true}};
  // NUL and U+FFFD and controls go, tabs become spaces, 你 is spaced, É loses its accent.
  using namespace std::string_literals;  // the text holds a NUL
  EXPECT_EQ(normalize(bert, "A\u0000\uFFFD\u0001b\tÉ你"s), "ab e 你 ");
}

// The charsmap of the differential test's Unigram tokenizer (nmt_nfkc rules).
tok::PrecompiledCharsmap fixture_charsmap() {
  std::ifstream in(std::filesystem::path(KVRT_SOURCE_DIR) /
                   "tests/fixtures/tokenizers/differential/unigram_precompiled_metaspace/"
                   "tokenizer.json");
  const json file = json::parse(in);
  const std::string base64 = file["normalizer"]["normalizers"][0]["precompiled_charsmap"];
  auto bytes = tok::base64_decode(base64, "charsmap");
  EXPECT_TRUE(bytes.ok());
  auto map = tok::PrecompiledCharsmap::parse(*bytes, "charsmap");
  EXPECT_TRUE(map.ok()) << map.status().to_string();
  return *map;
}

TEST(Precompiled, MapsThroughTheTrieByGraphemeAsHuggingFaceDoes) {
  const tok::PrecompiledCharsmap map = fixture_charsmap();
  EXPECT_EQ(map.normalize("\uFB01 \uFF21"), "fi A");  // single-character keys
  EXPECT_EQ(map.normalize("e\u0301"), "\u00E9");      // a two-character key
  EXPECT_EQ(map.normalize("a\u0001b"), "ab");         // a control maps to nothing
  // A grapheme under 6 bytes takes its first (shortest) key: "\r\n" is "\r" -> " ",
  // and the fullwidth A drops the accent that follows it.
  EXPECT_EQ(map.normalize("x\r\ny"), "x y");
  EXPECT_EQ(map.normalize("\uFF21\u0301"), "A");
  // A grapheme of 6 bytes or more goes char by char: ｶ + ﾞ (halfwidth voiced mark).
  EXPECT_EQ(map.normalize("\uFF76\uFF9E"), "\u30AB\u3099");
}

TEST(PreTokenizers, WhitespaceUsesUnicodeWordCharacters) {
  EXPECT_EQ(pre_tokenize({{"type", "Whitespace"}}, "straße, café!?"),
            (std::vector<std::string>{"straße", ",", "café", "!?"}));
}

TEST(PreTokenizers, DigitsAreUnicodeNumerics) {
  EXPECT_EQ(
      pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "x\u0661\u0662y\u00BD"),
      (std::vector<std::string>{"x", "\u0661\u0662", "y", "\u00BD"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "a12"),
            (std::vector<std::string>{"a", "1", "2"}));
}

TEST(PreTokenizers, PunctuationIsolatesEachCharacterByDefault) {
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}}, "a!!b"),
            (std::vector<std::string>{"a", "!", "!", "b"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}, {"behavior", "Contiguous"}}, "a!!b"),
            (std::vector<std::string>{"a", "!!", "b"}));
}

TEST(PreTokenizers, WhitespaceSplitAndBertSplitOnRustWhitespace) {
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}}, "a\u0085b\uFEFFc"),
            (std::vector<std::string>{"a", "b\uFEFFc"}));
  EXPECT_EQ(pre_tokenize({{"type", "BertPreTokenizer"}}, " Hey, you!"),
            (std::vector<std::string>{"Hey", ",", "you", "!"}));
}

TEST(PreTokenizers, SplitWithAStringPatternRemovesIt) {
  // transformers.js keeps a String delimiter under Removed; HF removes it.
  EXPECT_EQ(pre_tokenize({{"type", "Split"},
                          {"pattern", {{"String", "\n"}}},
                          {"behavior", "Removed"},
                          {"invert", false}},
                         "a\nb\n"),
            (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace kvrt
