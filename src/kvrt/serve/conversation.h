// A multi-turn conversation for `kvrt chat`: each turn renders the whole conversation
// with the chat template, as the model was trained to read it, and hands the tokens to
// Llm::generate_sequence, which prefills only what the cache does not already hold.
// When the new rendering extends the old token sequence (the usual case) that is just
// the new turn; when it does not (a template that rewrites earlier turns, or a reply
// that tokenizes differently as text than as generated), the cache is reused up to the
// longest common prefix and the rest is prefilled again, so the model always sees
// exactly what the template renders.
#pragma once

#include <optional>
#include <string>

#include "kvrt/api/kvrt.h"
#include "kvrt/jinja/chat_template.h"

namespace kvrt::serve {

struct ChatTurn {
  GenerationResult result;
  int32_t conversation_tokens = 0;  // the rendered conversation, as tokens
  int32_t reused_tokens = 0;        // of which taken from the KV cache
  int32_t prefilled_tokens = 0;     // of which run through the model now
  bool extended = false;            // the rendering extended the cached sequence
};

class Conversation {
 public:
  Conversation(Llm& llm, jinja::ChatTemplate chat_template, std::string system_prompt = "");

  // Adds the user's message, generates the reply and adds it (also when on_text
  // stopped it early: the conversation holds what was shown). On error the
  // conversation is as before the call.
  Result<ChatTurn> say(const std::string& user_text, const GenerateOptions& options,
                       const TokenCallback& on_text = {});
  // Forgets the conversation (the system prompt stays) and clears the cache.
  Status reset();

  const jinja::Json& messages() const { return messages_; }

 private:
  Llm& llm_;
  jinja::ChatTemplate template_;
  std::string system_prompt_;
  jinja::Json messages_;
};

}  // namespace kvrt::serve
