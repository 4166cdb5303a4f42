// Response bodies in OpenAI's shapes, and server-sent-event framing.
#include "kvrt/serve/responses.h"

#include <gtest/gtest.h>

#include "kvrt/serve/metrics.h"

namespace kvrt::serve {
namespace {

using Json = nlohmann::json;

ResponseHeader header(Endpoint endpoint) {
  return {endpoint, endpoint == Endpoint::kChat ? "chatcmpl-1" : "cmpl-1", 1700000000, "m"};
}

TEST(Responses, ChatCompletionCarriesMessageFinishReasonAndUsage) {
  const Json body = completion_body(header(Endpoint::kChat), "Hi", "stop", {10, 3, 8});
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["total_tokens"], 13);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
}

TEST(Responses, TextCompletionCarriesText) {
  const Json body = completion_body(header(Endpoint::kCompletion), "abc", "length", {1, 2, 0});
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  EXPECT_EQ(finish_reason(StopReason::kMaxNewTokens), "length");
  EXPECT_EQ(finish_reason(StopReason::kMaxContext), "length");
  EXPECT_EQ(finish_reason(StopReason::kEos), "stop");
  EXPECT_EQ(finish_reason(StopReason::kStopString), "stop");
}

TEST(Responses, ChatChunksCarryTheRoleFirstAndTheFinishReasonLast) {
  const Json first = chunk_body(header(Endpoint::kChat), "He", std::nullopt, true, false);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "He");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(first.contains("usage"));
  const Json last = chunk_body(header(Endpoint::kChat), "", "stop", false, true);
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last["usage"].is_null());  // include_usage: null until the usage chunk
  const Json usage = usage_chunk_body(header(Endpoint::kChat), {4, 2, 0});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST(Responses, SseEventIsOneDataLineEndedByABlankLine) {
  const std::string event = sse_event(Json{{"text", "two\nlines"}});
  EXPECT_EQ(event, "data: {\"text\":\"two\\nlines\"}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // A token cut inside a UTF-8 character is replaced, not thrown on.
  const std::string cut = sse_event(Json{{"text", std::string("\xE2\x82")}});
  EXPECT_EQ(cut.rfind("data: ", 0), 0u);
  EXPECT_EQ(cut.find('\n'), cut.size() - 2);
}

TEST(Metrics, PrometheusTextHasCountersGaugesAndTheHistogram) {
  Metrics metrics;
  metrics.count_request("chat_completions", 200);
  metrics.count_request("chat_completions", 200);
  metrics.count_request("completions", 400);
  metrics.add_tokens(10, 5, 4);
  metrics.observe_time_to_first_token(0.03);
  metrics.observe_time_to_first_token(20.0);
  const std::string text = metrics.render(3, true, 16);
  EXPECT_NE(text.find("kvrt_requests_total{endpoint=\"chat_completions\",status=\"200\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("kvrt_requests_total{endpoint=\"completions\",status=\"400\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("kvrt_queue_length 3\n"), std::string::npos);
  EXPECT_NE(text.find("kvrt_requests_running 1\n"), std::string::npos);
  EXPECT_NE(text.find("kvrt_completion_tokens_total 5\n"), std::string::npos);
  EXPECT_NE(text.find("kvrt_cached_prompt_tokens_total 4\n"), std::string::npos);
  EXPECT_NE(text.find("kvrt_time_to_first_token_seconds_bucket{le=\"0.025\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("kvrt_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("kvrt_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("kvrt_time_to_first_token_seconds_count 2\n"), std::string::npos);
}

}  // namespace
}  // namespace kvrt::serve
