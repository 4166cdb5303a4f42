#include "kvrt/serve/server.h"

#include "kvrt/serve/connection_probe.h"
#include "kvrt/serve/server_impl.h"

namespace kvrt::serve {

void send_json(httplib::Response& response, int status, const nlohmann::json& body) {
  response.status = status;
  response.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                       "application/json");
}

void send_error(Server::Impl& impl, const std::string& endpoint, httplib::Response& response,
                const ApiError& error) {
  send_json(response, error.status, error.to_json());
  impl.metrics.count_request(endpoint, error.status);
}

namespace {

ApiError status_error(int status, std::string message, std::string type, std::string code) {
  ApiError error;
  error.status = status;
  error.message = std::move(message);
  error.type = std::move(type);
  error.code = std::move(code);
  return error;
}

void add_routes(Server::Impl& impl) {
  httplib::Server& http = impl.http;
  http.Get("/health", [&impl](const httplib::Request&, httplib::Response& response) {
    send_json(response, impl.stopping.load() ? 503 : 200,
              {{"status", impl.stopping.load() ? "stopping" : "ok"}});
  });
  http.Get("/metrics", [&impl](const httplib::Request&, httplib::Response& response) {
    response.set_content(
        impl.metrics.render(impl.queue.waiting(), impl.queue.running(), impl.queue.capacity()),
        "text/plain; version=0.0.4");
  });
  auto model_json = [&impl] {
    return nlohmann::json{{"id", impl.service.model_name()},
                          {"object", "model"},
                          {"created", impl.started},
                          {"owned_by", "kvrt"}};
  };
  http.Get("/v1/models", [&impl, model_json](const httplib::Request&, httplib::Response& response) {
    send_json(response, 200, {{"object", "list"}, {"data", nlohmann::json::array({model_json()})}});
    impl.metrics.count_request("models", 200);
  });
  http.Get(R"(/v1/models/(.+))",
           [&impl, model_json](const httplib::Request& request, httplib::Response& response) {
             if (request.matches[1] != impl.service.model_name()) {
               ApiError error =
                   status_error(404, "the model '" + request.matches[1].str() + "' does not exist",
                                "invalid_request_error", "model_not_found");
               error.param = "model";
               return send_error(impl, "models", response, error);
             }
             send_json(response, 200, model_json());
             impl.metrics.count_request("models", 200);
           });
  http.Post("/v1/chat/completions",
            [&impl](const httplib::Request& request, httplib::Response& response) {
              handle_completion(impl, Endpoint::kChat, request, response);
            });
  http.Post("/v1/completions",
            [&impl](const httplib::Request& request, httplib::Response& response) {
              handle_completion(impl, Endpoint::kCompletion, request, response);
            });
}

}  // namespace

Server::Server(CompletionService& service, const ServerOptions& options)
    : service_(service), options_(options), queue_(options.queue) {
  impl_.reset(new Impl{service_, metrics_, queue_, stopping_, options_, {}});
}

Server::~Server() {
  shutdown();
}

Result<std::unique_ptr<Server>> Server::bind(CompletionService& service,
                                             const ServerOptions& options) {
  std::unique_ptr<Server> server(new Server(service, options));
  Impl& impl = *server->impl_;
  // httplib gives each connection a thread for as long as it is kept alive, and a
  // connection without a thread gets no answer at all, not even a 503. So: a thread
  // for every request the queue admits and the running one, and 32 more to refuse the
  // rest at once and to answer /health and /metrics; idle threads cost only stack.
  const size_t threads = options.queue + 1 + 32;
  impl.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl.http.set_payload_max_length(options.max_body_bytes);
  impl.http.set_pre_routing_handler([&impl](const httplib::Request& request,
                                            httplib::Response& response) {
    if (impl.options.api_key.empty() || request.path.rfind("/v1/", 0) != 0) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (request.get_header_value("Authorization") == "Bearer " + impl.options.api_key) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_error(impl, "auth", response,
               status_error(401, "missing or incorrect API key: send 'Authorization: Bearer KEY'",
                            "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own refusals (no route, body too large, unreadable request) get
  // OpenAI-shaped bodies too; responses that already have one are left alone.
  impl.http.set_error_handler(httplib::Server::HandlerWithResponse(
      [&impl](const httplib::Request& request, httplib::Response& response) {
        if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = "error " + std::to_string(response.status);
        if (response.status == 404) message = "no route for " + request.method + " " + request.path;
        if (response.status == 413) {
          message = "the request body is larger than " +
                    std::to_string(impl.options.max_body_bytes) + " bytes";
        }
        send_error(impl, "other", response,
                   status_error(response.status, message, "invalid_request_error", ""));
        return httplib::Server::HandlerResponse::Handled;
      }));
  add_routes(impl);
  if (options.port == 0) {
    server->port_ = impl.http.bind_to_any_port(options.host);
    if (server->port_ <= 0) {
      return invalid_argument("cannot listen on '", options.host, "' (--host)");
    }
  } else {
    if (!impl.http.bind_to_port(options.host, options.port)) {
      return invalid_argument("cannot listen on ", options.host, ":", options.port,
                              " (--host/--port): in use or not an address of this machine");
    }
    server->port_ = options.port;
  }
  return server;
}

Status Server::serve() {
  if (!impl_->http.listen_after_bind() && !stopping_.load()) {
    return internal_error("the server stopped listening on ", options_.host, ":", port_);
  }
  return Status();
}

void Server::shutdown() {
  if (stopping_.exchange(true)) return;
  queue_.close();
  service_.request_stop();
  impl_->http.stop();
  std::lock_guard lock(impl_->busy_mutex);
  ConnectionProbe::stop_reading_idle(port_, impl_->busy_sockets);
}

}  // namespace kvrt::serve
