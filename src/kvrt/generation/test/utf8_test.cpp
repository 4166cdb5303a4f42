#include "kvrt/generation/utf8.h"

#include <gtest/gtest.h>

namespace kvrt::utf8 {
namespace {

const std::string kFffd(kReplacement);

TEST(Utf8, WellFormedTextIsValid) {
  EXPECT_TRUE(is_valid("héllo 你好 🤗"));
  EXPECT_TRUE(is_valid(""));
}

TEST(Utf8, TruncatedSequenceIsOneReplacement) {
  // 你 is E4 BD A0; its first two bytes are one maximal subpart.
  EXPECT_EQ(to_valid_lossy("a\xE4\xBD"), "a" + kFffd);
  EXPECT_EQ(to_valid_lossy("\xE4\xBD"
                           "b"),
            kFffd + "b");
  EXPECT_EQ(first_invalid("ab\xE4\xBD"), 2u);
}

TEST(Utf8, OverlongAndSurrogateBytesAreReplacedOneByOne) {
  EXPECT_EQ(to_valid_lossy("\xC0\x80"), kFffd + kFffd);
  EXPECT_EQ(to_valid_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(to_valid_lossy("\xFF"), kFffd);
}

TEST(Utf8, DecodeAdvancesPastOneCharacter) {
  const std::string text = "a\xC3\xA9\xF0\x9F\xA4\x97";
  size_t pos = 0;
  EXPECT_EQ(decode(text, pos), U'a');
  EXPECT_EQ(decode(text, pos), U'\u00E9');
  EXPECT_EQ(decode(text, pos), U'\U0001F917');
  EXPECT_EQ(pos, text.size());
}

TEST(Utf8, AppendEncodesEveryLength) {
  std::string out;
  for (char32_t cp : {U'A', U'\u00E9', U'\u4F60', U'\U0001F917'}) append(out, cp);
  EXPECT_EQ(out, "A\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA4\x97");
}

TEST(Utf8, NfcComposesBaseAndMark) {
  EXPECT_EQ(nfc("cafe\u0301"), "caf\u00E9");
  EXPECT_EQ(nfc("A\u030A"), "\u00C5");
}

TEST(Utf8, NfcMapsSingletonsAndKeepsExclusions) {
  EXPECT_EQ(nfc("\u212B"), "\u00C5");        // ANGSTROM SIGN
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093C");  // excluded from composition
}

TEST(Utf8, NfcOrdersMarksCanonically) {
  // dot below (220) sorts before acute (230); a + dot below composes first.
  EXPECT_EQ(nfc("a\u0301\u0323"), "\u1EA1\u0301");
}

TEST(Utf8, NfcComposesHangulJamo) {
  EXPECT_EQ(nfc("\u1100\u1161\u11A8"), "\uAC01");
  EXPECT_EQ(nfc("\uAC01"), "\uAC01");
}

TEST(Utf8, NfcLeavesAsciiAndComposedTextAlone) {
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc("caf\u00E9 你好"), "caf\u00E9 你好");
}

TEST(Utf8, WhitespaceFollowsUnicode) {
  EXPECT_TRUE(is_whitespace(U' '));
  EXPECT_TRUE(is_whitespace(U'\u3000'));
  EXPECT_TRUE(is_whitespace(U'\u2003'));
  EXPECT_FALSE(is_whitespace(U'\u200B'));
  EXPECT_FALSE(is_whitespace(U'a'));
}

}  // namespace
}  // namespace kvrt::utf8
