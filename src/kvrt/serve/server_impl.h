// The server's internals shared by its two source files (routes in server.cpp, the
// completion endpoints in server_completion.cpp); keeps httplib.h out of server.h.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>

#include "kvrt/serve/api_error.h"
#include "kvrt/serve/completion_service.h"
#include "kvrt/serve/metrics.h"
#include "kvrt/serve/request.h"
#include "kvrt/serve/server.h"
#include "kvrt/serve/turn_queue.h"

namespace kvrt::serve {

struct Server::Impl {
  CompletionService& service;
  Metrics& metrics;
  TurnQueue& queue;
  std::atomic<bool>& stopping;
  const ServerOptions& options;
  httplib::Server http;
  std::atomic<uint64_t> next_id{0};
  // Sockets of completion requests in progress, left alone at shutdown.
  std::mutex busy_mutex;
  std::set<int> busy_sockets;
  const int64_t started = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
};

// Writes an OpenAI-shaped error response and counts it.
void send_error(Server::Impl& impl, const std::string& endpoint, httplib::Response& response,
                const ApiError& error);
void send_json(httplib::Response& response, int status, const nlohmann::json& body);

// POST /v1/chat/completions and /v1/completions.
void handle_completion(Server::Impl& impl, Endpoint endpoint, const httplib::Request& request,
                       httplib::Response& response);

}  // namespace kvrt::serve
