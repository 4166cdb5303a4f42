#include "kvrt/serve/conversation.h"

#include <algorithm>

namespace kvrt::serve {

Conversation::Conversation(Llm& llm, jinja::ChatTemplate chat_template, std::string system_prompt)
    : llm_(llm), template_(std::move(chat_template)), system_prompt_(std::move(system_prompt)) {
  messages_ = jinja::Json::array();
  if (!system_prompt_.empty()) {
    messages_.push_back({{"role", "system"}, {"content", system_prompt_}});
  }
}

Result<ChatTurn> Conversation::say(const std::string& user_text, const GenerateOptions& options,
                                   const TokenCallback& on_text) {
  jinja::Json next = messages_;
  next.push_back({{"role", "user"}, {"content", user_text}});
  KVRT_ASSIGN_OR_RETURN(std::string text,
                        template_.render(next, nullptr, /*add_generation_prompt=*/true));
  // The template writes its own special tokens (bos_token among them).
  KVRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, llm_.encode(text, /*add_special_tokens=*/false));
  const std::vector<int32_t> cached = llm_.tokens();
  ChatTurn turn;
  turn.extended =
      ids.size() > cached.size() && std::equal(cached.begin(), cached.end(), ids.begin());
  KVRT_ASSIGN_OR_RETURN(turn.result, llm_.generate_sequence(ids, options, on_text));
  turn.conversation_tokens = static_cast<int32_t>(ids.size());
  turn.reused_tokens = turn.result.stats.cached_tokens;
  turn.prefilled_tokens = turn.result.stats.prompt_tokens;
  next.push_back({{"role", "assistant"}, {"content", turn.result.text}});
  messages_ = std::move(next);
  return turn;
}

Status Conversation::reset() {
  messages_ = jinja::Json::array();
  if (!system_prompt_.empty()) {
    messages_.push_back({{"role", "system"}, {"content", system_prompt_}});
  }
  return llm_.reset();
}

}  // namespace kvrt::serve
