// Conversation on the bundled model: a turn that extends the conversation prefills only
// itself; a template that rewrites earlier turns falls back to the common prefix and
// still generates exactly what a fresh model given the whole rendering generates.
#include "kvrt/serve/conversation.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kvrt/serve/completion_service.h"

namespace kvrt::serve {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return fs::path(env ? env : KVRT_SOURCE_DIR);
}

class ConversationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = source_dir() / "models/fortune-llama";
    if (!fs::exists(model_)) GTEST_SKIP() << "no bundled model";
    LoadOptions options;
    options.device = "cpu";
    options.cache_dir = (fs::temp_directory_path() / "kvrt_conversation_test").string();
    auto llm = Llm::load(model_.string(), options);
    ASSERT_TRUE(llm.ok()) << llm.status().to_string();
    llm_ = std::move(*llm);
  }

  jinja::ChatTemplate load_template(const std::string& path) {
    auto loaded = load_chat_template(model_.string(), path, *llm_);
    EXPECT_TRUE(loaded.ok() && loaded->has_value());
    return std::move(**loaded);
  }

  static GenerateOptions greedy() {
    GenerateOptions options;
    options.max_new_tokens = 10;
    options.sampling.temperature = 0.0f;
    return options;
  }

  fs::path model_;
  std::unique_ptr<Llm> llm_;
};

// A one-token reply renders as the token it was generated as, so the second rendering
// extends the cached sequence: only the new turn (and the pending reply token, which
// was sampled but never run) is prefilled.
TEST_F(ConversationTest, ExtendingTurnPrefillsOnlyItself) {
  Conversation chat(*llm_,
                    load_template((source_dir() / "tests/fixtures/serve/chat.jinja").string()),
                    "You tell fortunes.");
  GenerateOptions one = greedy();
  one.max_new_tokens = 1;
  auto first = chat.say("Hello", one);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->reused_tokens, 0);
  EXPECT_EQ(first->prefilled_tokens, first->conversation_tokens);
  auto second = chat.say("And then?", greedy());
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_TRUE(second->extended);
  EXPECT_EQ(second->reused_tokens, first->conversation_tokens);
  EXPECT_EQ(second->prefilled_tokens, second->conversation_tokens - first->conversation_tokens);
  EXPECT_EQ(chat.messages().size(), 5u);  // system, user, assistant, user, assistant
}

// A longer reply may come out of the model as tokens its text does not encode back to
// (sampling is free to pick non-canonical splits); then the cache is reused up to
// where the two part, and never less than the first prompt.
TEST_F(ConversationTest, LongerReplyReusesAtLeastTheFirstPrompt) {
  Conversation chat(*llm_,
                    load_template((source_dir() / "tests/fixtures/serve/chat.jinja").string()),
                    "You tell fortunes.");
  auto first = chat.say("Hello", greedy());
  ASSERT_TRUE(first.ok());
  auto second = chat.say("And then?", greedy());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->reused_tokens + second->prefilled_tokens, second->conversation_tokens);
  EXPECT_GE(second->reused_tokens, first->conversation_tokens);
  EXPECT_LE(second->reused_tokens,
            first->conversation_tokens + first->result.stats.generated_tokens - 1);
  if (second->extended) {
    EXPECT_EQ(second->reused_tokens,
              first->conversation_tokens + first->result.stats.generated_tokens - 1);
  }
}

TEST_F(ConversationTest, RewrittenHistoryFallsBackToTheCommonPrefix) {
  // The message count at the top changes every turn: no rendering extends the last.
  const std::string source =
      "{{ bos_token }}{{ messages|length }} messages\n{% for m in messages %}{{ m.role }}: "
      "{{ m.content }}\n{% endfor %}assistant:";
  auto tmpl = jinja::ChatTemplate::from_source(source);
  auto chat_template = jinja::ChatTemplate::from_source(source);
  ASSERT_TRUE(tmpl.ok() && chat_template.ok());
  tmpl->set_bos_token("<|begin_of_text|>");
  chat_template->set_bos_token("<|begin_of_text|>");
  Conversation chat(*llm_, std::move(*chat_template));
  ASSERT_TRUE(chat.say("Hello", greedy()).ok());
  auto second = chat.say("More", greedy());
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->extended);
  EXPECT_EQ(second->reused_tokens, 1);  // only BOS is common
  EXPECT_EQ(second->prefilled_tokens, second->conversation_tokens - 1);

  // A fresh model given the same rendering generates the same reply.
  jinja::Json history = chat.messages();
  history.erase(history.size() - 1);
  auto text = tmpl->render(history, nullptr, true);
  ASSERT_TRUE(text.ok());
  auto ids = llm_->encode(*text, false);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(llm_->reset().ok());
  auto fresh = llm_->generate_ids(*ids, greedy());
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->ids, second->result.ids);
}

TEST_F(ConversationTest, ResetForgetsTheConversation) {
  Conversation chat(
      *llm_, load_template((source_dir() / "tests/fixtures/serve/chat.jinja").string()), "System.");
  auto first = chat.say("Hello", greedy());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(chat.reset().ok());
  EXPECT_EQ(chat.messages().size(), 1u);  // the system prompt stays
  auto again = chat.say("Hello", greedy());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->reused_tokens, 0);
  EXPECT_EQ(again->result.ids, first->result.ids);
}

TEST_F(ConversationTest, ModelWithoutTemplateHasNone) {
  auto none = load_chat_template(model_.string(), "", *llm_);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto missing = load_chat_template(model_.string(), "no/such/template.jinja", *llm_);
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace kvrt::serve
