// The server in process on a free loopback port with the bundled model: routes,
// the API key, httplib's own refusals in OpenAI's shape, prefix reuse across requests,
// and a shutdown that returns. (The OpenAI client, streaming and load are exercised by
// tests/node/serve.test.mjs against the kvrt binary.)
#include "kvrt/serve/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "kvrt/serve/connection_probe.h"

namespace kvrt::serve {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

fs::path source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return fs::path(env ? env : KVRT_SOURCE_DIR);
}

class ServerTest : public ::testing::Test {
 protected:
  void start(ServerOptions options) {
    const fs::path model = source_dir() / "models/fortune-llama";
    if (!fs::exists(model)) GTEST_SKIP() << "no bundled model";
    LoadOptions load;
    load.device = "cpu";
    load.cache_dir = (fs::temp_directory_path() / "kvrt_server_test").string();
    auto llm = Llm::load(model.string(), load);
    ASSERT_TRUE(llm.ok()) << llm.status().to_string();
    llm_ = std::move(*llm);
    auto chat_template = load_chat_template(
        model.string(), (source_dir() / "tests/fixtures/serve/chat.jinja").string(), *llm_);
    ASSERT_TRUE(chat_template.ok());
    service_ = std::make_unique<CompletionService>(*llm_, std::move(*chat_template), "fortune");
    options.port = 0;
    auto server = Server::bind(*service_, options);
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(*server);
    thread_ = std::thread([this] { EXPECT_TRUE(server_->serve().ok()); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    if (server_) server_->shutdown();
    if (thread_.joinable()) thread_.join();
  }

  httplib::Result post(const std::string& path, const Json& body,
                       const httplib::Headers& headers = {}) {
    return client_->Post(path.c_str(), headers, body.dump(), "application/json");
  }

  std::unique_ptr<Llm> llm_;
  std::unique_ptr<CompletionService> service_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

const Json kChat = {{"model", "fortune"},
                    {"messages", {{{"role", "user"}, {"content", "Tell me a fortune."}}}},
                    {"max_tokens", 6},
                    {"temperature", 0}};

TEST_F(ServerTest, HealthModelsAndUnknownRoutes) {
  start({});
  auto health = client_->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = client_->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "fortune");
  auto missing = client_->Get("/v1/models/other");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Json::parse(missing->body)["error"]["code"], "model_not_found");
  auto nowhere = client_->Get("/v2/nothing");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_TRUE(Json::parse(nowhere->body)["error"].contains("message"));
}

TEST_F(ServerTest, ApiKeyIsRequiredOnV1Routes) {
  ServerOptions options;
  options.api_key = "secret";
  start(options);
  auto refused = post("/v1/chat/completions", kChat);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(Json::parse(refused->body)["error"]["code"], "invalid_api_key");
  auto wrong = post("/v1/chat/completions", kChat, {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto accepted = post("/v1/chat/completions", kChat, {{"Authorization", "Bearer secret"}});
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->status, 200) << accepted->body;
  EXPECT_EQ(client_->Get("/health")->status, 200);  // no key needed
}

TEST_F(ServerTest, OversizedBodyIs413InOpenAIShape) {
  ServerOptions options;
  options.max_body_bytes = 256;
  start(options);
  Json big = kChat;
  big["messages"][0]["content"] = std::string(1000, 'x');
  auto response = post("/v1/chat/completions", big);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 413);
  EXPECT_NE(Json::parse(response->body)["error"]["message"].get<std::string>().find("256"),
            std::string::npos);
}

TEST_F(ServerTest, RepeatedConversationReusesTheCache) {
  start({});
  auto first = post("/v1/chat/completions", kChat);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  const Json a = Json::parse(first->body);
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // The same conversation plus the reply and a new message: all of the first prompt
  // is reused.
  Json next = kChat;
  next["messages"].push_back(
      {{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
  next["messages"].push_back({{"role", "user"}, {"content", "Another."}});
  auto second = post("/v1/chat/completions", next);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->status, 200) << second->body;
  const Json b = Json::parse(second->body);
  EXPECT_GE(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            a["usage"]["prompt_tokens"].get<int>());
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(
      metrics->body.find("kvrt_requests_total{endpoint=\"chat_completions\",status=\"200\"} 2"),
      std::string::npos)
      << metrics->body;
}

TEST_F(ServerTest, PromptLongerThanTheContextIsRefusedNotTruncated) {
  start({});
  Json body = {{"prompt", std::string(20000, 'a')}, {"max_tokens", 1}};
  auto response = post("/v1/completions", body);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 400);
  const Json error = Json::parse(response->body)["error"];
  EXPECT_EQ(error["code"], "context_length_exceeded");
  EXPECT_EQ(error["param"], "prompt");
}

TEST_F(ServerTest, ShutdownEndsServe) {
  start({});
  ASSERT_EQ(client_->Get("/health")->status, 200);
  const auto begin = std::chrono::steady_clock::now();
  server_->shutdown();
  thread_.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
}

TEST(ConnectionProbe, SeesThePeerClose) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const ConnectionProbe probe = ConnectionProbe::of_socket(fds[0]);
  EXPECT_FALSE(probe.peer_closed());
  close(fds[1]);
  EXPECT_TRUE(probe.peer_closed());
  close(fds[0]);
  EXPECT_FALSE(ConnectionProbe::find(1, "127.0.0.1", 2).found());
}

}  // namespace
}  // namespace kvrt::serve
