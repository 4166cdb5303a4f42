// Encodes and decodes a corpus with @huggingface/transformers' tokenizer (the JS port
// of Hugging Face tokenizers), the independent reference that kvrt's differential
// tokenizer test (src/kvrt/generation/test/tokenizer_differential_test.cpp) compares with.
//   node encode_tokenizers.mjs CORPUS.json DIR... > RESULTS.json
// Each DIR holds a tokenizer.json (and optionally tokenizer_config.json). RESULTS.json
// maps each DIR to one entry per corpus string:
//   {"ids": [...], "ids_special": [...], "decoded": "...", "decoded_special": "...",
//    "decoded_skip": "..."} or {"error": "..."}
// ids: encode without special tokens; ids_special: with them; decoded: decode(ids);
// decoded_special / decoded_skip: decode(ids_special) keeping / skipping special tokens.
// No network: the tokenizer is built from the files' JSON directly.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PreTrainedTokenizer, env } from "@huggingface/transformers";

env.allowRemoteModels = false;

const corpus = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = {};
for (const dir of process.argv.slice(3)) {
  const tokenizerJson = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
  const configPath = join(dir, "tokenizer_config.json");
  const config = existsSync(configPath) ? JSON.parse(readFileSync(configPath, "utf8")) : {};
  let tokenizer;
  try {
    tokenizer = new PreTrainedTokenizer(tokenizerJson, config);
  } catch (error) {
    results[dir] = { error: String(error?.message ?? error) };
    continue;
  }
  // Rust tokenizers' decode does no clean-up of spaces; transformers.js does by default.
  const decode = (ids, skip) =>
    ids.length === 0
      ? ""
      : tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
  results[dir] = corpus.map((text) => {
    try {
      const ids = tokenizer.encode(text, { add_special_tokens: false });
      const ids_special = tokenizer.encode(text, { add_special_tokens: true });
      return {
        ids,
        ids_special,
        decoded: decode(ids, false),
        decoded_special: decode(ids_special, false),
        decoded_skip: decode(ids_special, true),
      };
    } catch (error) {
      return { error: String(error?.message ?? error) };
    }
  });
}
process.stdout.write(JSON.stringify(results));
