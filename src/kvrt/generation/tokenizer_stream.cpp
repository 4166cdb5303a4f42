// StreamDecoder: decodes a window of ids (the tokens of the last emitted chunk, for
// context, plus the pending ones) and emits what decoding the pending ones added.
// Context matters because decoders are not per token: Strip removes the leading space
// of the whole text only and Metaspace treats the first token differently, so a token
// decoded alone can lose a space that the full decode keeps. Text ending in U+FFFD is
// an incomplete character and is held; so is a run of <0xNN> byte-fallback tokens,
// which HF decodes as a group (one invalid byte turns the whole group into U+FFFD).
#include "kvrt/generation/tokenizer.h"
#include "kvrt/generation/utf8.h"

namespace kvrt {

Result<std::string> StreamDecoder::push(int32_t id) {
  if (!tokenizer_.token_text(id)) {
    return invalid_argument("stream decode: token id ", id, " is not in the vocabulary");
  }
  ids_.push_back(id);
  // A run of <0xNN> tokens decodes as a whole, so it is held until a token that is
  // shown ends it (a skipped special token does not).
  if (!(skip_special_tokens_ && tokenizer_.is_special(id))) {
    byte_run_open_ = tokenizer_.is_fallback_byte(id);
  }
  if (byte_run_open_) return std::string();
  KVRT_ASSIGN_OR_RETURN(std::string text, tokenizer_.decode(ids_, skip_special_tokens_));
  if (text.size() <= context_text_.size() || text.ends_with(utf8::kReplacement) ||
      !text.starts_with(context_text_)) {
    return std::string();
  }
  std::string out = text.substr(context_text_.size());
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(context_));
  context_ = ids_.size();
  KVRT_ASSIGN_OR_RETURN(context_text_, tokenizer_.decode(ids_, skip_special_tokens_));
  return out;
}

Result<std::string> StreamDecoder::flush() {
  std::string out;
  if (ids_.size() > context_) {
    KVRT_ASSIGN_OR_RETURN(std::string text, tokenizer_.decode(ids_, skip_special_tokens_));
    if (text.size() > context_text_.size() && text.starts_with(context_text_)) {
      out = text.substr(context_text_.size());
    }
  }
  ids_.clear();
  context_ = 0;
  context_text_.clear();
  byte_run_open_ = false;
  return out;
}

}  // namespace kvrt
