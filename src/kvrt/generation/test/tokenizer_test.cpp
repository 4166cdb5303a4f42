// Tokenizer behaviour on small hand-built tokenizer.json files (test/data), whose
// expected ids are derived by hand and were checked against Hugging Face tokenizers.
#include "kvrt/generation/tokenizer.h"

#include <gtest/gtest.h>

#include "kvrt/generation/test/tokenizer_test_util.h"

namespace kvrt {
namespace {

using testing::load_patched;
using testing::stream_all;
using testing::test_data;
using Ids = std::vector<int32_t>;

Tokenizer load(const std::string& name) {
  auto tokenizer = Tokenizer::load(test_data(name).string());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  return std::move(tokenizer).value();
}

Ids encode(const Tokenizer& tokenizer, std::string_view text, bool special = false) {
  auto ids = tokenizer.encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : Ids{};
}

std::string decode(const Tokenizer& tokenizer, const Ids& ids, bool skip = false) {
  auto text = tokenizer.decode(ids, skip);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? *text : "";
}

// --- byte-level BPE: vocab h e l o Ġ w r d he ll Ġw ! Ã ©, merges (h e) (l l) (Ġ w)

TEST(ByteLevelTokenizer, AppliesMergesByRank) {
  Tokenizer tok = load("byte_level_tiny.json");
  // "hello" -> he ll o; " world" -> Ġw o r l d
  EXPECT_EQ(encode(tok, "hello world"), (Ids{8, 9, 3, 10, 3, 6, 2, 7}));
  EXPECT_EQ(encode(tok, "hello world!"), (Ids{8, 9, 3, 10, 3, 6, 2, 7, 11}));
}

TEST(ByteLevelTokenizer, TemplateAddsBos) {
  Tokenizer tok = load("byte_level_tiny.json");
  EXPECT_EQ(encode(tok, "hello", true), (Ids{14, 8, 9, 3}));
  EXPECT_EQ(encode(tok, "", true), (Ids{14}));
  EXPECT_EQ(tok.bos_id(), 14);
}

TEST(ByteLevelTokenizer, MultiByteCharacterBecomesByteCharacters) {
  Tokenizer tok = load("byte_level_tiny.json");
  // é is C3 A9, whose byte-level characters are Ã and ©.
  EXPECT_EQ(encode(tok, "\u00E9"), (Ids{12, 13}));
  EXPECT_EQ(decode(tok, {12, 13}), "\u00E9");
}

TEST(ByteLevelTokenizer, CharacterOutsideVocabularyIsDroppedLikeHuggingFace) {
  Tokenizer tok = load("byte_level_tiny.json");
  EXPECT_EQ(encode(tok, "hex"), (Ids{8}));
}

TEST(ByteLevelTokenizer, SpecialTokensInTextAreMatchedWhole) {
  Tokenizer tok = load("byte_level_tiny.json");
  EXPECT_EQ(encode(tok, "<|bos|>hello<|eos|>"), (Ids{14, 8, 9, 3, 15}));
  EXPECT_EQ(decode(tok, {14, 8, 9, 3, 15}), "<|bos|>hello<|eos|>");
  EXPECT_EQ(decode(tok, {14, 8, 9, 3, 15}, /*skip=*/true), "hello");
  EXPECT_TRUE(tok.is_special(15));
  EXPECT_FALSE(tok.is_special(8));
}

TEST(ByteLevelTokenizer, DecodesToText) {
  Tokenizer tok = load("byte_level_tiny.json");
  EXPECT_EQ(decode(tok, {8, 9, 3, 10, 3, 6, 2, 7}), "hello world");
}

TEST(ByteLevelTokenizer, LooksUpTokensBothWays) {
  Tokenizer tok = load("byte_level_tiny.json");
  EXPECT_EQ(tok.token_id("Ġw"), 10);
  EXPECT_EQ(tok.token_id("<|eos|>"), 15);
  EXPECT_EQ(tok.token_id("nope"), std::nullopt);
  EXPECT_EQ(tok.token_text(10), "Ġw");
  EXPECT_EQ(tok.token_text(99), std::nullopt);
  EXPECT_EQ(tok.vocab_size(), 16);
}

TEST(ByteLevelTokenizer, StreamHoldsSplitCharacterUntilComplete) {
  Tokenizer tok = load("byte_level_tiny.json");
  std::vector<std::string> pieces;
  EXPECT_EQ(stream_all(tok, {8, 12, 13, 11}, &pieces), "he\u00E9!");
  ASSERT_EQ(pieces.size(), 5u);  // four pushes and the flush
  EXPECT_EQ(pieces[0], "he");
  EXPECT_EQ(pieces[1], "");  // C3 alone is half a character
  EXPECT_EQ(pieces[2], "\u00E9");
  EXPECT_EQ(pieces[3], "!");
}

TEST(ByteLevelTokenizer, StreamFlushEmitsIncompleteCharacterAsReplacement) {
  Tokenizer tok = load("byte_level_tiny.json");
  EXPECT_EQ(stream_all(tok, {8, 12}), "he\uFFFD");
  EXPECT_EQ(decode(tok, {8, 12}), "he\uFFFD");
}

TEST(ByteLevelTokenizer, GptTwoRegexSplitsWordsWithLeadingSpace) {
  // With add_prefix_space, " hello" and "hello" tokenize alike.
  auto tok = load_patched("byte_level_tiny.json",
                          [](nlohmann::json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(encode(*tok, "world"), (Ids{10, 3, 6, 2, 7}));
}

TEST(ByteLevelTokenizer, SplitPreTokenizerWithByteLevelMatchesBuiltInRegex) {
  auto tok = load_patched("byte_level_tiny.json", [](nlohmann::json& j) {
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", R"( ?\p{L}+|\s+(?!\S)|\s+|[^\s\p{L}]+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(encode(*tok, "hello world!"), (Ids{8, 9, 3, 10, 3, 6, 2, 7, 11}));
}

TEST(ByteLevelTokenizer, IgnoreMergesTakesWholeWordFromVocabulary) {
  auto tok = load_patched("byte_level_tiny.json", [](nlohmann::json& j) {
    j["model"]["vocab"].erase("!");
    j["model"]["vocab"]["hel"] = 11;  // no merge builds it: reachable only as a whole word
    j["model"]["ignore_merges"] = true;
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(encode(*tok, "hel"), (Ids{11}));
  EXPECT_EQ(encode(*tok, "hell"), (Ids{8, 9}));
}

TEST(ByteLevelTokenizer, AddedTokenHonoursLstripAndRstrip) {
  auto tok = load_patched("byte_level_tiny.json", [](nlohmann::json& j) {
    j["added_tokens"].push_back({{"id", 16},
                                 {"content", "<m>"},
                                 {"single_word", false},
                                 {"lstrip", true},
                                 {"rstrip", true},
                                 {"normalized", false},
                                 {"special", false}});
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  // The spaces around <m> belong to it, so "he" and "he" stay without Ġ.
  EXPECT_EQ(encode(*tok, "he  <m>  he"), (Ids{8, 16, 8}));
}

TEST(ByteLevelTokenizer, SingleWordTokenMatchesOnlyBetweenWordBoundaries) {
  auto tok = load_patched("byte_level_tiny.json", [](nlohmann::json& j) {
    j["added_tokens"].push_back({{"id", 16},
                                 {"content", "lo"},
                                 {"single_word", true},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", false}});
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(encode(*tok, "hello"), (Ids{8, 9, 3}));  // "lo" inside a word is not the token
  EXPECT_EQ(encode(*tok, "lo!"), (Ids{16, 11}));
}

// --- SentencePiece-style BPE: ▁ h i ▁h ▁hi hi, byte fallback, fused <unk>

TEST(SentencePieceTokenizer, PrependsMetaspaceAndMerges) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  EXPECT_EQ(encode(tok, "hi hi"), (Ids{11, 11}));
  EXPECT_EQ(encode(tok, "hi  hi"), (Ids{11, 7, 11}));
  EXPECT_EQ(encode(tok, "hi hi", true), (Ids{1, 11, 11}));
}

TEST(SentencePieceTokenizer, UnknownCharactersFallBackToBytes) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  EXPECT_EQ(encode(tok, "hi\n\u4F60"), (Ids{11, 3, 4, 5, 6}));
  EXPECT_EQ(decode(tok, {11, 3, 4, 5, 6}), "hi\n\u4F60");
}

TEST(SentencePieceTokenizer, CharactersWithoutByteTokensFuseIntoOneUnk) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  EXPECT_EQ(encode(tok, "h\u00E9"), (Ids{10, 0}));
  EXPECT_EQ(encode(tok, "h\u00E9\u00E9"), (Ids{10, 0}));
}

TEST(SentencePieceTokenizer, EmptyAndSpaceOnlyText) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  EXPECT_EQ(encode(tok, ""), Ids{});
  EXPECT_EQ(encode(tok, "", true), (Ids{1}));
  EXPECT_EQ(encode(tok, " "), (Ids{7, 7}));
}

TEST(SentencePieceTokenizer, EachSegmentBetweenSpecialTokensGetsThePrefix) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  EXPECT_EQ(encode(tok, "hi<s>hi"), (Ids{11, 1, 11}));
  EXPECT_EQ(decode(tok, {11, 1, 11}), "hi<s> hi");
  EXPECT_EQ(decode(tok, {1, 11, 1, 11}, /*skip=*/true), "hi hi");
}

TEST(SentencePieceTokenizer, DecodeStripsOnlyTheFirstSpace) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  EXPECT_EQ(decode(tok, {11, 11}), "hi hi");
  EXPECT_EQ(decode(tok, {1, 11}), "<s> hi");
  EXPECT_EQ(decode(tok, {7, 7}), " ");
}

TEST(SentencePieceTokenizer, InvalidByteRunDecodesAsOneReplacementPerByte) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  // E4 BD without A0 is not UTF-8: ByteFallback gives U+FFFD per byte.
  EXPECT_EQ(decode(tok, {11, 4, 5, 11}), "hi\uFFFD\uFFFD hi");
}

TEST(SentencePieceTokenizer, StreamHoldsByteRunsAndMatchesFullDecode) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  for (const Ids& ids : {Ids{11, 3, 4, 5, 6, 11}, Ids{11, 4, 5, 11}, Ids{7, 7, 11},
                         Ids{1, 11, 7, 4, 5, 6}, Ids{4, 1, 5, 6}}) {
    EXPECT_EQ(stream_all(tok, ids), decode(tok, ids)) << ::testing::PrintToString(ids);
  }
  std::vector<std::string> pieces;
  stream_all(tok, {11, 4, 5, 6, 11}, &pieces);
  EXPECT_EQ(pieces, (std::vector<std::string>{"hi", "", "", "", "\u4F60 hi", ""}));
}

TEST(SentencePieceTokenizer, MetaspaceFirstPrefixesOnlyTheStartOfTheInput) {
  auto tok = load_patched("sentencepiece_tiny.json", [](nlohmann::json& j) {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"},
                          {"replacement", "\u2581"},
                          {"prepend_scheme", "first"},
                          {"split", false}};
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(encode(*tok, "hi<s>hi"), (Ids{11, 1, 12}));
  EXPECT_EQ(encode(*tok, "hi hi"), (Ids{11, 11}));
}

TEST(SentencePieceTokenizer, LegacyMetaspaceSplitsOnSpaces) {
  auto tok = load_patched("sentencepiece_tiny.json", [](nlohmann::json& j) {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}};
    j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}};
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(encode(*tok, "hi hi"), (Ids{11, 11}));
  EXPECT_EQ(decode(*tok, {11, 11}), "hi hi");
}

TEST(SentencePieceTokenizer, BosAndEosComeFromTokenizerConfig) {
  // test/data/checkpoint is a checkpoint directory: tokenizer.json beside
  // tokenizer_config.json.
  auto tok = Tokenizer::load(test_data("checkpoint").string());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
}

TEST(SentencePieceTokenizer, EosIsUnknownWithoutTokenizerConfig) {
  Tokenizer tok = load("sentencepiece_tiny.json");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), std::nullopt);
}

}  // namespace
}  // namespace kvrt
