// Differential test: every tokenizer in tests/fixtures/tokenizers/differential (small
// made-up ones covering each supported component), the bundled model's and the HF-made
// fixtures, on every string of differential/corpus.json: kvrt must give the same ids
// (with and without special tokens) and the same decoded text (keeping and skipping
// special tokens) as @huggingface/transformers, run through node
// (tests/node/encode_tokenizers.mjs). Skips, saying why, without node or
// tests/node/node_modules (scripts/setup.sh runs `npm ci` there).
//
// transformers.js is a port of the Rust library and differs from it in a few places;
// kvrt follows the Rust library (HF `tokenizers`, what Python transformers runs). The
// cases that reach such a difference are listed in known_divergences() with the reason,
// counted and left out of the comparison; tokenizer_components_test.cpp checks kvrt's
// behaviour there against values derived from the Rust source.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kvrt/generation/tokenizer.h"
#include "kvrt/generation/utf8.h"

namespace kvrt {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(KVRT_SOURCE_DIR);
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool contains_code_point(const std::string& text, const std::function<bool(char32_t)>& predicate) {
  for (size_t pos = 0; pos < text.size();) {
    if (predicate(utf8::decode(text, pos))) return true;
  }
  return false;
}

struct Divergence {
  std::vector<std::string> tokenizers;  // directory names
  std::function<bool(const std::string& text, const Tokenizer& tokenizer)> applies;
  std::string reason;
};

bool has(const std::string& text, char32_t code_point) {
  return contains_code_point(text, [&](char32_t c) { return c == code_point; });
}

// Whether the first token that decode() sees, keeping or skipping special tokens,
// starts with the Metaspace replacement.
bool first_decoded_token_has_metaspace(const std::string& text, const Tokenizer& tokenizer) {
  auto ids = tokenizer.encode(text, true);
  if (!ids.ok()) return false;
  for (bool skip : {false, true}) {
    for (int32_t id : *ids) {
      if (skip && tokenizer.is_special(id)) continue;
      if (tokenizer.token_text(id).value_or("").starts_with("\u2581")) return true;
      break;
    }
  }
  return false;
}

// Where transformers.js 4.3 (@huggingface/tokenizers 0.2) differs from the Rust
// library; the Rust behaviour is what kvrt implements (sources: huggingface/tokenizers,
// tokenizers/src/{normalizers,pre_tokenizers,decoders,models}). Each entry says which
// tokenizers and which texts reach the difference.
const std::vector<Divergence>& known_divergences() {
  static const std::vector<Divergence> list = {
      // Rust lowercases char by char (NormalizedString::lowercase, char::to_lowercase), so
      // Σ is always σ; JS String.toLowerCase applies the final-sigma rule (ς).
      {{"bpe_bert_normalizer_wordpiece_decoder", "bpe_nfd_strip_accents_whitespace_suffix",
        "bpe_nfkd_lowercase_metaspace_first", "unigram_metaspace_never_nosplit"},
       [](const std::string& text, const Tokenizer&) { return has(text, U'\u03A3'); },
       "final sigma: JS toLowerCase"},
      // Rust's Whitespace splits on the Unicode regex \w+|[^\w\s]+; transformers.js
      // uses JS \w, which is ASCII only, so any non-ASCII letter or digit splits apart.
      {{"bpe_nfd_strip_accents_whitespace_suffix"},
       [](const std::string& text, const Tokenizer&) {
         return contains_code_point(text,
                                    [](char32_t c) { return c >= 0x80 && !utf8::is_mark(c); });
       },
       "Whitespace: JS \\w is ASCII"},
      // Rust's char::is_whitespace (Strip, WhitespaceSplit) includes U+0085 and not
      // U+FEFF; JS trim() and \s the other way round. TextDecoder (transformers.js's
      // ByteFallback) also drops a U+FEFF at the start of a byte run, which Rust keeps.
      {{"bpe_byte_fallback_punctuation_digits", "unigram_precompiled_metaspace",
        "sentencepiece_bpe"},
       [](const std::string& text, const Tokenizer&) {
         return has(text, U'\u0085') || has(text, U'\uFEFF');
       },
       "U+0085/U+FEFF: JS whitespace and TextDecoder BOM"},
      // transformers.js's Unigram has no byte_fallback: it emits unk where Rust emits
      // <0xNN> tokens.
      {{"unigram_byte_fallback_prepend"},
       [](const std::string& text, const Tokenizer& tokenizer) {
         for (size_t pos = 0; pos < text.size();) {
           const size_t begin = pos;
           utf8::decode(text, pos);
           const std::string c = text.substr(begin, pos - begin);
           if (c != " " && !tokenizer.token_id(c)) return true;
         }
         return false;
       },
       "Unigram byte_fallback: not in JS"},
      // transformers.js's Metaspace decoder drops the first token's leading replacement
      // whatever prepend_scheme says; Rust keeps it for "never".
      {{"unigram_metaspace_never_nosplit"},
       first_decoded_token_has_metaspace,
       "Metaspace decoder: JS ignores prepend_scheme never"},
      // Rust's Precompiled maps a grapheme cluster shorter than 6 bytes through the
      // first (shortest) key that prefixes it, so "\r\n" becomes " " (its first key is
      // "\r"), and longer clusters char by char; transformers.js approximates the map
      // with NFKC of the whole text.
      {{"unigram_precompiled_metaspace"},
       [](const std::string& text, const Tokenizer&) {
         return text.find("\r\n") != std::string::npos ||
                contains_code_point(text, [](char32_t c) { return utf8::is_mark(c); });
       },
       "Precompiled: JS uses NFKC, not the charsmap"},
  };
  return list;
}

std::string run_node(const fs::path& root, const fs::path& corpus,
                     const std::vector<fs::path>& dirs) {
  const fs::path out =
      fs::temp_directory_path() / ("kvrt_tokenizer_diff_" + std::to_string(::getpid()) + ".json");
  std::string command = "node \"" + (root / "tests/node/encode_tokenizers.mjs").string() + "\" \"" +
                        corpus.string() + "\"";
  for (const fs::path& dir : dirs) command += " \"" + dir.string() + "\"";
  command += " > \"" + out.string() + "\"";
  const int status = std::system(command.c_str());
  std::string text = read(out);
  fs::remove(out);
  return status == 0 ? text : std::string();
}

struct Outcome {
  int equal = 0;
  std::map<std::string, int> excluded;  // by reason
  int mismatched = 0;
};

TEST(TokenizerDifferential, MatchesHuggingFaceTransformersJs) {
  const fs::path root = source_dir();
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(root / "tests/node/node_modules/@huggingface/transformers")) {
    GTEST_SKIP() << "tests/node/node_modules is missing: run `npm ci` in tests/node";
  }
  const fs::path fixtures = root / "tests/fixtures/tokenizers";
  const fs::path corpus_path = fixtures / "differential/corpus.json";
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(fixtures / "differential")) {
    if (fs::exists(entry.path() / "tokenizer.json")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const char* extra :
       {"tests/fixtures/tokenizers/byte_bpe", "tests/fixtures/tokenizers/sentencepiece_bpe",
        "models/fortune-llama"}) {
    dirs.push_back(root / extra);
  }
  const Json corpus = Json::parse(read(corpus_path));
  ASSERT_TRUE(corpus.is_array());
  const std::string output = run_node(root, corpus_path, dirs);
  ASSERT_FALSE(output.empty()) << "encode_tokenizers.mjs failed";
  const Json reference = Json::parse(output);

  int total_equal = 0;
  int total_excluded = 0;
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    SCOPED_TRACE(name);
    auto tokenizer = Tokenizer::load(dir.string());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
    const Json& cases = reference.at(dir.string());
    ASSERT_TRUE(cases.is_array()) << cases.dump();
    Outcome outcome;
    for (size_t i = 0; i < corpus.size(); ++i) {
      const std::string text = corpus[i].get<std::string>();
      const Json& expected = cases[i];
      const Divergence* divergence = nullptr;
      for (const Divergence& d : known_divergences()) {
        if (std::find(d.tokenizers.begin(), d.tokenizers.end(), name) != d.tokenizers.end() &&
            d.applies(text, *tokenizer)) {
          divergence = &d;
          break;
        }
      }
      if (divergence != nullptr) {
        ++outcome.excluded[divergence->reason];
        continue;
      }
      ASSERT_FALSE(expected.contains("error")) << Json(text).dump() << ": " << expected.dump();
      const auto ids = expected.at("ids").get<std::vector<int32_t>>();
      const auto ids_special = expected.at("ids_special").get<std::vector<int32_t>>();
      auto encoded = tokenizer->encode(text, false);
      auto encoded_special = tokenizer->encode(text, true);
      auto decoded = tokenizer->decode(ids, false);
      auto decoded_special = tokenizer->decode(ids_special, false);
      auto decoded_skip = tokenizer->decode(ids_special, true);
      const bool ok = encoded.ok() && encoded_special.ok() && decoded.ok() &&
                      decoded_special.ok() && decoded_skip.ok() && *encoded == ids &&
                      *encoded_special == ids_special && *decoded == expected.at("decoded") &&
                      *decoded_special == expected.at("decoded_special") &&
                      *decoded_skip == expected.at("decoded_skip");
      if (ok) {
        ++outcome.equal;
        continue;
      }
      const std::string label = "case " + std::to_string(i) + " " + Json(text).dump();
      // A systematic bug should not flood the log: details for the first five only.
      if (++outcome.mismatched > 5) {
        std::printf("%s also differs: %s\n", name.c_str(), label.c_str());
        continue;
      }
      ASSERT_TRUE(encoded.ok() && encoded_special.ok()) << label;
      ASSERT_TRUE(decoded.ok() && decoded_special.ok() && decoded_skip.ok()) << label;
      EXPECT_EQ(*encoded, ids) << label;
      EXPECT_EQ(*encoded_special, ids_special) << label;
      EXPECT_EQ(Json(*decoded).dump(), expected.at("decoded").dump()) << label;
      EXPECT_EQ(Json(*decoded_special).dump(), expected.at("decoded_special").dump()) << label;
      EXPECT_EQ(Json(*decoded_skip).dump(), expected.at("decoded_skip").dump()) << label;
    }
    EXPECT_EQ(outcome.mismatched, 0) << name << ": " << outcome.mismatched << " strings differ";
    std::printf("%-45s %4d equal", name.c_str(), outcome.equal);
    for (const auto& [reason, count] : outcome.excluded) {
      std::printf(", %d excluded (%s)", count, reason.c_str());
      total_excluded += count;
    }
    std::printf("\n");
    total_equal += outcome.equal;
  }
  std::printf("%zu tokenizers x %zu strings: %d equal, %d excluded\n", dirs.size(), corpus.size(),
              total_equal, total_excluded);
}

}  // namespace
}  // namespace kvrt
