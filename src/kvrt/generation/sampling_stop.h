// When generation stops: an end-of-sequence token, a user stop string (matched on the
// decoded text, also when it spans several tokens), a maximum number of new tokens, or
// the model's context length. It also decides what text may be shown: text that could
// be the start of a stop string is held back until the next token settles it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrt/core/result.h"

namespace kvrt {

enum class StopReason { kNone, kEos, kStopString, kMaxNewTokens, kMaxContext };
std::string_view stop_reason_name(StopReason reason);

struct StopParams {
  std::vector<int32_t> eos_ids;
  std::vector<std::string> stop_strings;
  std::optional<int32_t> max_new_tokens;  // nullopt: only the context limits
  int32_t max_context = 0;                // tokens the model can attend to; required
};

class StopChecker {
 public:
  // InvalidArgument when the prompt is longer than max_context, when max_context is
  // not positive, when max_new_tokens is not positive, or for an empty stop string.
  static Result<StopChecker> create(StopParams params, size_t prompt_tokens);

  // Takes a generated token and the text it added (from StreamDecoder::push). Sets
  // `emit` to the text that can be shown now and returns why generation stops, or
  // kNone. An EOS token's own text is not shown; with kStopString, `emit` ends right
  // before the stop string. The token that reaches a length limit is shown.
  StopReason push(int32_t token, std::string_view text, std::string& emit);

  // Held-back text, for when generation ends without push() saying so.
  std::string flush();

  size_t generated() const { return generated_; }

 private:
  StopChecker(StopParams params, size_t prompt_tokens)
      : params_(std::move(params)), prompt_tokens_(prompt_tokens) {}
  // Length of the longest suffix of held_ that is a proper prefix of a stop string.
  size_t partial_stop_length() const;

  StopParams params_;
  size_t prompt_tokens_;
  size_t generated_ = 0;
  std::string held_;
};

}  // namespace kvrt
