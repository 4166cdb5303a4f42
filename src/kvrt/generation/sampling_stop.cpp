#include "kvrt/generation/sampling_stop.h"

#include <algorithm>

namespace kvrt {

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "none";
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopString:
      return "stop_string";
    case StopReason::kMaxNewTokens:
      return "max_new_tokens";
    case StopReason::kMaxContext:
      return "max_context";
  }
  return "unknown";
}

Result<StopChecker> StopChecker::create(StopParams params, size_t prompt_tokens) {
  if (params.max_context <= 0) {
    return invalid_argument("max_context must be positive, got ", params.max_context);
  }
  if (prompt_tokens > static_cast<size_t>(params.max_context)) {
    return invalid_argument("prompt has ", prompt_tokens, " tokens, more than the context of ",
                            params.max_context);
  }
  if (params.max_new_tokens && *params.max_new_tokens <= 0) {
    return invalid_argument("max_new_tokens must be positive, got ", *params.max_new_tokens);
  }
  for (const std::string& stop : params.stop_strings) {
    if (stop.empty()) return invalid_argument("stop strings must not be empty");
  }
  return StopChecker(std::move(params), prompt_tokens);
}

size_t StopChecker::partial_stop_length() const {
  size_t longest = 0;
  for (const std::string& stop : params_.stop_strings) {
    const size_t limit = std::min(stop.size() - 1, held_.size());
    for (size_t n = limit; n > longest; --n) {
      if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

StopReason StopChecker::push(int32_t token, std::string_view text, std::string& emit) {
  emit.clear();
  ++generated_;
  const bool eos =
      std::find(params_.eos_ids.begin(), params_.eos_ids.end(), token) != params_.eos_ids.end();
  if (eos) {
    emit = flush();
    return StopReason::kEos;
  }
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& stop : params_.stop_strings) {
    first = std::min(first, held_.find(stop));
  }
  if (first != std::string::npos) {
    emit = held_.substr(0, first);
    held_.clear();
    return StopReason::kStopString;
  }
  if (params_.max_new_tokens && generated_ >= static_cast<size_t>(*params_.max_new_tokens)) {
    emit = flush();
    return StopReason::kMaxNewTokens;
  }
  if (prompt_tokens_ + generated_ >= static_cast<size_t>(params_.max_context)) {
    emit = flush();
    return StopReason::kMaxContext;
  }
  const size_t keep = partial_stop_length();
  emit = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return StopReason::kNone;
}

std::string StopChecker::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace kvrt
