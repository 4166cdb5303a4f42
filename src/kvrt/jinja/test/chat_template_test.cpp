// Finding a model's chat template where Hugging Face keeps it, and rendering it with
// the variables transformers passes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kvrt/jinja/chat_template.h"

namespace kvrt::jinja {
namespace {

namespace fs = std::filesystem;

class ChatTemplateLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvrt_chat_template_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::string render(const ChatTemplate& t, bool add_generation_prompt = false) {
    auto out = t.render(Json::parse(R"([{"role": "user", "content": "hi"}])"), nullptr,
                        add_generation_prompt);
    return out.ok() ? *out : out.status().to_string();
  }
  fs::path dir_;
};

TEST_F(ChatTemplateLoad, StringTemplateAndAddedTokenSpecialTokens) {
  write("tokenizer_config.json",
        R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
            "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}{{ eos_token }}"})");
  for (const fs::path& path : {dir_, dir_ / "tokenizer_config.json"}) {
    auto t = ChatTemplate::load(path);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->bos_token(), std::optional<std::string>("<s>"));
    EXPECT_EQ(render(*t), "<s>[hi]</s>");
  }
}

TEST_F(ChatTemplateLoad, NamedTemplateListPicksDefault) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "tools"},
                              {"name": "default", "template": "default:{{ messages|length }}"}]})");
  auto t = ChatTemplate::load(dir_);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(render(*t), "default:1");
}

TEST_F(ChatTemplateLoad, ListWithoutDefaultIsNotFound) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  auto t = ChatTemplate::load(dir_);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(t.status().message().find("\"rag\""), std::string::npos) << t.status().message();
}

TEST_F(ChatTemplateLoad, JinjaFileBesideTheConfigWins) {
  write("tokenizer_config.json", R"({"eos_token": "<|end|>", "chat_template": "from config"})");
  write("chat_template.jinja",
        "from file{{ eos_token }}{% if add_generation_prompt %}>{% endif %}\n");
  auto t = ChatTemplate::load(dir_);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(render(*t, true), "from file<|end|>>");
  auto direct = ChatTemplate::load(dir_ / "chat_template.jinja");
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(render(*direct), "from file<|end|>");
}

TEST_F(ChatTemplateLoad, MissingTemplateIsNotFound) {
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_EQ(ChatTemplate::load(dir_).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(ChatTemplate::load(dir_ / "absent").status().code(), ErrorCode::kNotFound);
  write("tokenizer_config.json", "{not json");
  EXPECT_EQ(ChatTemplate::load(dir_).status().code(), ErrorCode::kInvalidArgument);
}

TEST(ChatTemplateRender, ToolsAreNoneWhenAbsentAndExtraVariablesArePassed) {
  auto t = ChatTemplate::from_source(
      "{{ tools is none }} {{ tools is defined }} {{ enable_thinking }} {{ bos_token }}");
  ASSERT_TRUE(t.ok());
  auto out =
      t->render(Json::array(), nullptr, false, {{"enable_thinking", false}, {"bos_token", "B"}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "True True False B");
  EXPECT_FALSE(t->render(Json::object(), nullptr, false).ok());  // messages must be a list
}

}  // namespace
}  // namespace kvrt::jinja
