// libFuzzer target for tokenizer.json: load, then encode a text and decode the ids.
// The input is "TOKENIZER_JSON\0TEXT" (without a NUL, a fixed text is encoded). A
// loaded tokenizer decodes every id it produced, and nothing is refused as internal.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "kvrt/generation/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvrt;
  auto [json, text] = fuzz::split_at_nul(data, size);
  if (text.empty()) text = "Hello world! 12 apples, <s> ünïcode 😀\n\tend";
  auto tokenizer = Tokenizer::from_json(json, "tokenizer.json");
  if (!tokenizer.ok()) {
    fuzz::check_refusal(tokenizer.status());
    return 0;
  }
  for (bool special : {true, false}) {
    auto ids = tokenizer->encode(text, special);
    if (!ids.ok()) {
      fuzz::check_refusal(ids.status());
      continue;
    }
    auto decoded = tokenizer->decode(*ids, /*skip_special_tokens=*/!special);
    if (!decoded.ok()) __builtin_trap();  // its own ids must decode
  }
  // Ids from the text's bytes: decode refuses unknown ids, never crashes.
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) * 7 - 40);
  auto decoded = tokenizer->decode(ids, false);
  fuzz::check_refusal(decoded.status());
  return 0;
}
