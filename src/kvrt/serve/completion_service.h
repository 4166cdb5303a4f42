// What the server asks of the model, apart from HTTP: turn a checked request into
// prompt tokens (rendering the chat template for chat requests), the generation
// options it asks for, and a generation that reuses the cached conversation's prefix.
//
//   CompletionRequest ─► prompt_ids() ─► ids ─► generate() ─► Llm::generate_sequence
//                        (template, encode,        (options_for: max_tokens, sampling,
//                         context check)             stop strings, seed)
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kvrt/api/kvrt.h"
#include "kvrt/jinja/chat_template.h"
#include "kvrt/serve/api_error.h"
#include "kvrt/serve/request.h"

namespace kvrt::serve {

class CompletionService {
 public:
  // `chat_template`: nullopt when the model has none and none was given; chat
  // requests are then refused, saying how to give one.
  CompletionService(Llm& llm, std::optional<jinja::ChatTemplate> chat_template,
                    std::string model_name);

  // The prompt as tokens. 400 for a prompt longer than the context (never truncated)
  // or token ids outside the vocabulary; 422 when the template refuses the
  // conversation (raise_exception) or cannot render it.
  std::variant<std::vector<int32_t>, ApiError> prompt_ids(const CompletionRequest& request) const;
  GenerateOptions options_for(const CompletionRequest& request, size_t prompt_tokens) const;

  // Runs on the model; the caller holds the turn (TurnQueue).
  Result<GenerationResult> generate(const std::vector<int32_t>& ids, const GenerateOptions& options,
                                    const TokenCallback& on_text);
  void request_stop() { llm_.request_stop(); }

  const std::string& model_name() const { return model_name_; }
  bool has_chat_template() const { return chat_template_.has_value(); }
  int32_t max_context() const { return llm_.max_context(); }

 private:
  Llm& llm_;
  std::optional<jinja::ChatTemplate> chat_template_;
  std::string model_name_;
};

// The model's chat template: `override_path` when given (a .jinja file, a
// tokenizer_config.json or a model directory), else the model directory's own.
// bos_token/eos_token missing from the template's config come from the tokenizer.
// nullopt (not an error) when neither exists; errors for an unreadable or malformed one.
Result<std::optional<jinja::ChatTemplate>> load_chat_template(const std::string& model_path,
                                                              const std::string& override_path,
                                                              const Llm& llm);

}  // namespace kvrt::serve
