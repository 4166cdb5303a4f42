// Request parsing: what is accepted, and that every refusal is OpenAI-shaped and names
// its field.
#include "kvrt/serve/request.h"

#include <gtest/gtest.h>

namespace kvrt::serve {
namespace {

CompletionRequest parse_ok(std::string_view body, Endpoint endpoint = Endpoint::kChat) {
  ParsedRequest parsed = parse_request(body, endpoint);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << error->message;
    return {};
  }
  return std::get<CompletionRequest>(parsed);
}

ApiError parse_error(std::string_view body, Endpoint endpoint = Endpoint::kChat) {
  ParsedRequest parsed = parse_request(body, endpoint);
  if (!std::holds_alternative<ApiError>(parsed)) {
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }
  return std::get<ApiError>(parsed);
}

TEST(ParseRequest, ReadsEveryChatField) {
  const CompletionRequest r = parse_ok(R"({"model": "m", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
      "max_completion_tokens": 7, "max_tokens": 99, "temperature": 0.5, "top_p": 0.9,
      "stop": "END", "seed": 42, "n": 1, "presence_penalty": 0, "stream": true,
      "stream_options": {"include_usage": true}, "user": "ignored"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "Hi there");  // text parts joined
  EXPECT_EQ(r.max_tokens, 7);                       // max_completion_tokens wins
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.seed, 42u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(ParseRequest, CompletionPromptIsTextOrOneListOfIds) {
  EXPECT_EQ(parse_ok(R"({"prompt": "Once"})", Endpoint::kCompletion).prompt, "Once");
  EXPECT_EQ(parse_ok(R"({"prompt": ["Once"]})", Endpoint::kCompletion).prompt, "Once");
  EXPECT_EQ(parse_ok(R"({"prompt": [0, 5, 9]})", Endpoint::kCompletion).prompt_ids,
            (std::vector<int32_t>{0, 5, 9}));
  EXPECT_EQ(parse_error(R"({"prompt": ["a", "b"]})", Endpoint::kCompletion).param, "prompt");
  EXPECT_EQ(parse_error(R"({"prompt": [-1]})", Endpoint::kCompletion).param, "prompt");
  EXPECT_EQ(parse_error(R"({})", Endpoint::kCompletion).param, "prompt");
  const CompletionRequest defaults = parse_ok(R"({"prompt": "x"})", Endpoint::kCompletion);
  EXPECT_FALSE(defaults.max_tokens);
  EXPECT_FALSE(defaults.seed);
  EXPECT_FALSE(defaults.stream);
}

TEST(ParseRequest, BadFieldsAreNamed) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 3}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})", "top_p"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": [""]})", "stop"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": ["a","b","c","d","e"]})",
       "stop"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": 5})", "stop"},
      {R"({"messages": [{"role": "user", "content": "x"}], "seed": "7"})", "seed"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", "n"},
      {R"({"messages": [{"role": "user", "content": "x"}], "presence_penalty": 0.5})",
       "presence_penalty"},
      {R"({"messages": [{"role": "user", "content": "x"}], "frequency_penalty": 1})",
       "frequency_penalty"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})", "stream"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream_options": {}})",
       "stream_options"},
      {R"({"messages": [{"role": "user", "content": "x"}], "model": 3})", "model"},
  };
  for (const Case& c : cases) {
    const ApiError error = parse_error(c.body);
    EXPECT_EQ(error.status, 400) << c.body;
    EXPECT_EQ(error.param, c.param) << c.body;
    EXPECT_NE(error.message.find(c.param), std::string::npos) << error.message;
    const nlohmann::json json = error.to_json();
    EXPECT_EQ(json["error"]["param"], c.param);
    EXPECT_EQ(json["error"]["type"], "invalid_request_error");
  }
}

TEST(ParseRequest, BodyThatIsNotAJsonObjectIsRefused) {
  for (const char* body : {"", "{", "[1]", "\"text\""}) {
    const ApiError error = parse_error(body);
    EXPECT_EQ(error.status, 400);
    EXPECT_TRUE(error.to_json()["error"]["param"].is_null());
  }
}

}  // namespace
}  // namespace kvrt::serve
