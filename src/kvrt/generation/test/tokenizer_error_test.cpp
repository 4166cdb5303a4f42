// Every unsupported or malformed part of tokenizer.json is refused with an error that
// names the field; nothing is ignored, and no exception leaves the library.
#include <gtest/gtest.h>

#include "kvrt/generation/test/tokenizer_test_util.h"
#include "kvrt/generation/tokenizer.h"

namespace kvrt {
namespace {

using nlohmann::json;
using testing::load_patched;

// Loads the byte-level test file after `patch` and expects `code` with a message
// containing `field`.
void expect_refused(const std::function<void(json&)>& patch, ErrorCode code,
                    const std::string& field, const std::string& file = "byte_level_tiny.json") {
  auto tok = load_patched(file, patch);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), code) << tok.status().to_string();
  EXPECT_NE(tok.status().message().find(field), std::string::npos) << tok.status().to_string();
}

TEST(TokenizerErrors, WordPieceModelIsNotSupported) {
  expect_refused([](json& j) { j["model"]["type"] = "WordPiece"; }, ErrorCode::kNotSupported,
                 "model.type: model 'WordPiece'");
}

TEST(TokenizerErrors, WordLevelModelIsNotSupported) {
  expect_refused([](json& j) { j["model"]["type"] = "WordLevel"; }, ErrorCode::kNotSupported,
                 "model.type: model 'WordLevel'");
}

TEST(TokenizerErrors, UnigramVocabularyThatIsNotPairsIsNamedByIndex) {
  expect_refused(
      [](json& j) {
        j["model"] =
            json::parse(R"({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a"]]})");
      },
      ErrorCode::kInvalidArgument, "model.vocab[1]: expected [piece, score]");
}

TEST(TokenizerErrors, UnigramUnkIdOutsideTheVocabularyIsNamed) {
  expect_refused(
      [](json& j) {
        j["model"] = json::parse(R"({"type": "Unigram", "unk_id": 5, "vocab": [["<unk>", 0.0]]})");
      },
      ErrorCode::kInvalidArgument, "model.unk_id");
}

TEST(TokenizerErrors, PrecompiledCharsmapThatIsNotBase64IsNamed) {
  expect_refused(
      [](json& j) {
        j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "not base64!"}};
      },
      ErrorCode::kInvalidArgument, "normalizer.precompiled_charsmap");
}

TEST(TokenizerErrors, PrecompiledCharsmapWithATruncatedTrieIsRefused) {
  // Header says 64 bytes of trie, 4 follow.
  expect_refused(
      [](json& j) {
        j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "QAAAAAAAAAA="}};
      },
      ErrorCode::kInvalidArgument, "normalizer.precompiled_charsmap: trie size 64");
}

TEST(TokenizerErrors, MissingPrecompiledCharsmapIsNamed) {
  expect_refused(
      [](json& j) {
        j["normalizer"] = {{"type", "Precompiled"}};
      },
      ErrorCode::kInvalidArgument, "normalizer.precompiled_charsmap: missing");
}

TEST(TokenizerErrors, UnknownPreTokenizerInsideSequenceIsNamedByIndex) {
  expect_refused(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers", {{{"type", "Whitespace"}}, {{"type", "Foo"}}}}};
      },
      ErrorCode::kNotSupported, "pre_tokenizer.pretokenizers[1].type: pre-tokenizer 'Foo'");
}

TEST(TokenizerErrors, UnknownNormalizerIsNamed) {
  expect_refused(
      [](json& j) {
        j["normalizer"] = {{"type", "Mystery"}};
      },
      ErrorCode::kNotSupported, "normalizer.type: normalizer 'Mystery'");
}

TEST(TokenizerErrors, UnknownNormalizerInsideSequenceIsNamedByIndex) {
  expect_refused(
      [](json& j) {
        j["normalizer"]["normalizers"][1] = {{"type", "Nmt"}};
      },
      ErrorCode::kNotSupported, "normalizer.normalizers[1].type", "sentencepiece_tiny.json");
}

TEST(TokenizerErrors, UnknownPreTokenizerIsNamed) {
  expect_refused(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
      },
      ErrorCode::kNotSupported, "pre_tokenizer.type: pre-tokenizer 'UnicodeScripts'");
}

TEST(TokenizerErrors, UnknownDecoderIsNamed) {
  expect_refused(
      [](json& j) {
        j["decoder"] = {{"type", "CTC"}};
      },
      ErrorCode::kNotSupported, "decoder.type: decoder 'CTC'");
}

TEST(TokenizerErrors, UnknownPostProcessorIsNamed) {
  expect_refused(
      [](json& j) {
        j["post_processor"] = {{"type", "Mystery"}};
      },
      ErrorCode::kNotSupported, "post_processor.type");
}

TEST(TokenizerErrors, UnknownSplitBehaviorIsNamed) {
  expect_refused(
      [](json& j) {
        j["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
      },
      ErrorCode::kNotSupported, "pre_tokenizer.behavior");
}

TEST(TokenizerErrors, RegexThatDoesNotCompileIsNamed) {
  expect_refused(
      [](json& j) {
        j["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
      },
      ErrorCode::kNotSupported, "pre_tokenizer.pattern");
}

TEST(TokenizerErrors, MergeOfUnknownTokenIsNamedByIndex) {
  expect_refused(
      [](json& j) {
        j["model"]["merges"][2] = {"Ġ", "zz"};
      },
      ErrorCode::kInvalidArgument, "model.merges[2]");
}

TEST(TokenizerErrors, MalformedMergeStringIsNamed) {
  expect_refused([](json& j) { j["model"]["merges"][0] = "hello"; }, ErrorCode::kInvalidArgument,
                 "model.merges[0]");
}

TEST(TokenizerErrors, DropoutIsNotSupported) {
  expect_refused([](json& j) { j["model"]["dropout"] = 0.1; }, ErrorCode::kNotSupported,
                 "model.dropout");
}

TEST(TokenizerErrors, MergeShorterThanTheSubwordPrefixIsNamed) {
  expect_refused([](json& j) { j["model"]["continuing_subword_prefix"] = "###"; },
                 ErrorCode::kInvalidArgument, "model.merges[0]");
}

TEST(TokenizerErrors, WrongJsonTypeIsInvalidArgumentNotException) {
  expect_refused([](json& j) { j["model"]["vocab"]["h"] = "zero"; }, ErrorCode::kInvalidArgument,
                 "model.vocab['h']");
  expect_refused([](json& j) { j["added_tokens"][0]["id"] = "x"; }, ErrorCode::kInvalidArgument,
                 "added_tokens[0].id");
  expect_refused([](json& j) { j["pre_tokenizer"]["use_regex"] = "yes"; },
                 ErrorCode::kInvalidArgument, "pre_tokenizer.use_regex");
}

TEST(TokenizerErrors, MissingModelIsNamed) {
  expect_refused([](json& j) { j.erase("model"); }, ErrorCode::kInvalidArgument, "model: missing");
}

TEST(TokenizerErrors, TemplateSpecialTokenWithoutIdsIsNamed) {
  expect_refused([](json& j) { j["post_processor"]["special_tokens"] = json::object(); },
                 ErrorCode::kInvalidArgument, "post_processor.special_tokens");
}

TEST(TokenizerErrors, TextThatIsNotJsonIsInvalidArgument) {
  auto tok = Tokenizer::from_json("{\"model\": [1, 2", "broken.json");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(tok.status().message().find("broken.json"), std::string::npos);
}

TEST(TokenizerErrors, MissingFileIsNotFound) {
  auto tok = Tokenizer::load("/nonexistent/kvrt/tokenizer.json");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), ErrorCode::kNotFound);
}

TEST(TokenizerErrors, DirectoryWithoutTokenizerJsonIsNotFound) {
  auto tok = Tokenizer::load(testing::test_data("").string());
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), ErrorCode::kNotFound);
}

TEST(TokenizerErrors, DecodingUnknownIdIsInvalidArgument) {
  auto tok = Tokenizer::load(testing::test_data("byte_level_tiny.json").string());
  ASSERT_TRUE(tok.ok());
  const std::vector<int32_t> ids = {8, 9999};
  auto text = tok->decode(ids, false);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), ErrorCode::kInvalidArgument);
  StreamDecoder stream(*tok);
  EXPECT_FALSE(stream.push(-1).ok());
  EXPECT_TRUE(stream.push(8).ok());  // the stream goes on after a refused id
}

TEST(TokenizerErrors, EncodingInvalidUtf8IsInvalidArgument) {
  auto tok = Tokenizer::load(testing::test_data("byte_level_tiny.json").string());
  ASSERT_TRUE(tok.ok());
  auto ids = tok->encode("he\xFFllo", false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find("byte 2"), std::string::npos);
}

}  // namespace
}  // namespace kvrt

namespace kvrt {
namespace {

TEST(TokenizerErrors, EmptyVocabularyIsRefused) {
  expect_refused(
      [](json& j) {
        j["model"]["vocab"] = json::object();
        j["model"]["merges"] = json::array();
      },
      ErrorCode::kInvalidArgument, "model.vocab: empty");
}

TEST(TokenizerErrors, EmptyAddedTokenIsRefused) {
  expect_refused([](json& j) { j["added_tokens"][1]["content"] = ""; }, ErrorCode::kInvalidArgument,
                 "added_tokens[1].content: empty");
}

// A pattern that backtracks past PCRE2's match limit is the file's fault: the error is
// InvalidArgument naming the file and the field, not an internal error.
TEST(TokenizerErrors, RegexBeyondItsMatchLimitNamesFileAndField) {
  auto tok = testing::load_patched("byte_level_tiny.json", [](json& j) {
    j["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", {{"Regex", "(a|aa)+$"}}},
                          {"behavior", "Isolated"},
                          {"invert", false}};
  });
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto ids = tok->encode(std::string(64, 'a') + "b", false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), ErrorCode::kInvalidArgument) << ids.status().to_string();
  EXPECT_NE(ids.status().message().find("byte_level_tiny.json"), std::string::npos)
      << ids.status().to_string();
  EXPECT_NE(ids.status().message().find("pre_tokenizer"), std::string::npos)
      << ids.status().to_string();
}

}  // namespace
}  // namespace kvrt
