// kvrt's OpenAI-compatible HTTP server (cpp-httplib): routes, the API key, the turn
// queue in front of the one model, metrics, and shutdown.
//
//   client ─► httplib thread ─► auth ─► parse_request ─► prompt_ids ─► TurnQueue
//                                                                        │ (503 when full)
//            JSON or SSE   ◄── CompletionService::generate ◄── its turn ─┘
//
// One model serves one request at a time, in arrival order; the threads of waiting
// requests only wait. Shutdown closes the queue (waiting requests get 503), stops the
// running generation (its stream ends with an error event) and joins every thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "kvrt/core/result.h"
#include "kvrt/serve/completion_service.h"
#include "kvrt/serve/metrics.h"
#include "kvrt/serve/turn_queue.h"

namespace kvrt::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (port() says which)
  std::string api_key;  // non-empty: every /v1 request needs "Authorization: Bearer KEY"
  size_t queue = 16;    // requests that may wait behind the running one
  size_t max_body_bytes = 4 << 20;  // larger bodies: 413
};

class Server {
 public:
  ~Server();
  // Binds host:port. kInvalidArgument naming the address when it cannot.
  static Result<std::unique_ptr<Server>> bind(CompletionService& service,
                                              const ServerOptions& options);

  // Serves until shutdown(); returns once every connection's thread has ended.
  Status serve();
  // From any thread (not a signal handler): stop accepting, end waits, stop the model.
  void shutdown();

  int port() const { return port_; }
  const Metrics& metrics() const { return metrics_; }

  struct Impl;

 private:
  Server(CompletionService& service, const ServerOptions& options);

  CompletionService& service_;
  ServerOptions options_;
  Metrics metrics_;
  TurnQueue queue_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvrt::serve
