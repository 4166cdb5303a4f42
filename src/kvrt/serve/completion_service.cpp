#include "kvrt/serve/completion_service.h"

#include <filesystem>
#include <random>

#include "kvrt/jinja/template.h"

namespace kvrt::serve {

CompletionService::CompletionService(Llm& llm, std::optional<jinja::ChatTemplate> chat_template,
                                     std::string model_name)
    : llm_(llm), chat_template_(std::move(chat_template)), model_name_(std::move(model_name)) {}

std::variant<std::vector<int32_t>, ApiError> CompletionService::prompt_ids(
    const CompletionRequest& request) const {
  std::vector<int32_t> ids;
  if (request.endpoint == Endpoint::kChat) {
    if (!chat_template_) {
      return bad_field("messages", "model '" + model_name_ +
                                       "' has no chat template: start kvrt serve with "
                                       "--chat-template FILE, or use /v1/completions");
    }
    auto text = chat_template_->render(request.messages, request.tools,
                                       /*add_generation_prompt=*/true);
    if (!text.ok()) {
      ApiError error = bad_field("messages", "");
      error.status = 422;
      auto raised = jinja::raised_message(text.status());
      error.message = raised ? "the chat template refused the conversation: " + *raised
                             : "cannot render the chat template: " + text.status().to_string();
      return error;
    }
    // The template writes the special tokens it wants (bos_token among them), so none
    // is added: what transformers' apply_chat_template(tokenize=True) does.
    auto encoded = llm_.encode(*text, /*add_special_tokens=*/false);
    if (!encoded.ok()) return bad_field("messages", encoded.status().to_string());
    ids = std::move(*encoded);
  } else if (!request.prompt_ids.empty()) {
    const int32_t vocab = llm_.tokenizer() ? llm_.tokenizer()->vocab_size() : 0;
    for (int32_t id : request.prompt_ids) {
      if (vocab > 0 && id >= vocab) {
        return bad_field("prompt", "token id " + std::to_string(id) +
                                       " is outside the vocabulary of " + std::to_string(vocab));
      }
    }
    ids = request.prompt_ids;
  } else {
    auto encoded = llm_.encode(request.prompt, /*add_special_tokens=*/true);
    if (!encoded.ok()) return bad_field("prompt", encoded.status().to_string());
    ids = std::move(*encoded);
  }
  const std::string field = request.endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (ids.empty()) return bad_field(field, "the prompt has no tokens");
  if (ids.size() > static_cast<size_t>(llm_.max_context())) {
    ApiError error = context_exceeded(
        "the prompt has " + std::to_string(ids.size()) + " tokens; the model's context is " +
        std::to_string(llm_.max_context()) + " tokens (prompts are not truncated)");
    error.param = field;
    return error;
  }
  return ids;
}

GenerateOptions CompletionService::options_for(const CompletionRequest& request,
                                               size_t prompt_tokens) const {
  GenerateOptions options;
  const int32_t room =
      std::max<int32_t>(1, llm_.max_context() - static_cast<int32_t>(prompt_tokens));
  // The OpenAI API's defaults: 16 tokens for completions, as many as fit for chat.
  const int32_t fallback = request.endpoint == Endpoint::kCompletion ? 16 : room;
  options.max_new_tokens = std::min(request.max_tokens.value_or(fallback), room);
  options.sampling.temperature = request.temperature;
  options.sampling.top_p = request.top_p;
  options.sampling.seed = request.seed ? *request.seed : std::random_device{}();
  options.stop_strings = request.stop;
  options.ignore_eos = request.ignore_eos;
  return options;
}

Result<GenerationResult> CompletionService::generate(const std::vector<int32_t>& ids,
                                                     const GenerateOptions& options,
                                                     const TokenCallback& on_text) {
  return llm_.generate_sequence(ids, options, on_text);
}

Result<std::optional<jinja::ChatTemplate>> load_chat_template(const std::string& model_path,
                                                              const std::string& override_path,
                                                              const Llm& llm) {
  namespace fs = std::filesystem;
  std::optional<jinja::ChatTemplate> result;
  if (!override_path.empty()) {
    KVRT_ASSIGN_OR_RETURN(jinja::ChatTemplate loaded, jinja::ChatTemplate::load(override_path));
    result = std::move(loaded);
  } else {
    std::error_code error;
    if (!fs::is_directory(model_path, error)) return result;  // a program file: no config
    auto loaded = jinja::ChatTemplate::load(model_path);
    if (!loaded.ok()) {
      if (loaded.status().code() == ErrorCode::kNotFound) return result;
      return loaded.status();
    }
    result = std::move(*loaded);
  }
  // A bare .jinja file knows no special tokens: take the tokenizer's, as transformers
  // takes them from the tokenizer the template belongs to.
  if (const auto& tokenizer = llm.tokenizer()) {
    if (!result->bos_token() && tokenizer->bos_id()) {
      if (auto text = tokenizer->token_text(*tokenizer->bos_id())) result->set_bos_token(*text);
    }
    if (!result->eos_token() && tokenizer->eos_id()) {
      if (auto text = tokenizer->token_text(*tokenizer->eos_id())) result->set_eos_token(*text);
    }
  }
  return result;
}

}  // namespace kvrt::serve
