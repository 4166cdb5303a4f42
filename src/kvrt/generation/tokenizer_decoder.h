// tokenizer.json "decoder": turns token strings back into text. Supported: ByteLevel,
// Metaspace, WordPiece, BPEDecoder, and Sequence of Replace, ByteFallback, Fuse, Strip
// (the Llama 2 / TinyLlama chain), each with Hugging Face's decode_chain semantics: every step maps
// the list of token strings to a new list, and the result is their concatenation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvrt/core/result.h"
#include "kvrt/generation/tokenizer_json.h"

namespace kvrt::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual Status decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a null decoder (tokens are then joined with spaces, as HF does).
Result<std::unique_ptr<Decoder>> parse_decoder(const Json& json, const std::string& where);

// Runs decoder (or the space join when null) and concatenates the result.
Result<std::string> run_decoder(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace kvrt::tok
