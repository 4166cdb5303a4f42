// Tokenizer: text <-> token ids, built from the Hugging Face tokenizer.json of a
// checkpoint, with the same results as HF `tokenizers`.
//
//   text ─► added-token split ─► normalizer ─► pre-tokenizer ─► model ─► post-processor
//   ids  ─► token strings ─► decoder chain ─► text
//
// Supported: BPE (byte-level as GPT-2, Llama 3, Qwen2; SentencePiece-style with byte
// fallback as Llama 2; with subword prefix or word suffix) and Unigram (T5, ALBERT),
// with HF's normalizers (Unicode forms, Precompiled charsmaps, BERT's), pre-tokenizers,
// post-processors and decoders. Anything else in the file (another model type, an
// unknown component) fails to load with an error naming the JSON path; nothing is
// silently ignored. docs/tokenizer.md lists what is supported.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt {

class Tokenizer {
 public:
  // path: a tokenizer.json file, or a checkpoint directory that holds one. A
  // tokenizer_config.json beside it, when present, names the BOS and EOS tokens.
  // Errors: NotFound (no file), InvalidArgument (malformed JSON or field, naming
  // the field), NotSupported (a component kvrt does not implement, naming the field).
  static Result<Tokenizer> load(const std::string& path);

  // Builds a tokenizer from tokenizer.json text; `source` prefixes error messages.
  // config_json is the optional text of tokenizer_config.json.
  static Result<Tokenizer> from_json(std::string_view json_text, std::string_view source,
                                     std::string_view config_json = {});

  // Token ids of text (which must be UTF-8; InvalidArgument otherwise). With
  // add_special_tokens the post-processor's tokens (e.g. BOS) are added.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const;

  // Text of ids. skip_special_tokens drops added tokens marked special. An id that no
  // token has is InvalidArgument (HF drops it silently; kvrt does not guess).
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // The id of a token string (added token or vocabulary entry).
  std::optional<int32_t> token_id(std::string_view token) const;
  // The string of a token id, before decoding ("Ġworld", "<0x0A>", "<s>").
  std::optional<std::string> token_text(int32_t id) const;
  // 1 + the largest token id. The model's embedding table may be larger.
  int32_t vocab_size() const;
  bool is_special(int32_t id) const;

  // The BOS token: the single token the post-processor puts first, else
  // tokenizer_config.json's bos_token. EOS comes from tokenizer_config.json only.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

  struct Impl;  // opaque: defined in tokenizer.cpp

 private:
  friend class StreamDecoder;
  // Whether id is a <0xNN> token that the decoder's ByteFallback step groups with the
  // byte tokens around it (a later byte can turn the group into U+FFFD replacements).
  bool is_fallback_byte(int32_t id) const;

  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // immutable, so copies share it
};

// Decodes tokens one at a time, as they are generated, and returns only complete
// UTF-8: a character split across tokens is held until its last byte arrives, so the
// concatenation of everything returned equals tokenizer.decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(Tokenizer tokenizer, bool skip_special_tokens = false)
      : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {}

  // The new text that id completes (possibly empty). InvalidArgument for an unknown id,
  // which is not kept.
  Result<std::string> push(int32_t id);
  // Whatever is still held (an incomplete character decodes as U+FFFD), then resets.
  Result<std::string> flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;  // ids_[0, context_) were emitted and give context only
  size_t context_ = 0;
  std::string context_text_;    // decode(ids_[0, context_))
  bool byte_run_open_ = false;  // the last shown token was a fallback byte
};

}  // namespace kvrt
