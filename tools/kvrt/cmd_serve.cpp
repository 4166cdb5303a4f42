// `kvrt serve MODEL`: an OpenAI-compatible HTTP server on one model (docs/serve.md).
// Binds 127.0.0.1 unless told otherwise; --port 0 takes any free port and says which
// on stderr ("listening on http://HOST:PORT"). SIGINT/SIGTERM shut it down cleanly.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "command.h"
#include "flags.h"
#include "kvrt/api/kvrt.h"
#include "kvrt/serve/completion_service.h"
#include "kvrt/serve/server.h"

namespace {

struct ServeArgs {
  kvrt::cli::ModelArg model_arg;
  std::string model;  // resolved from model_arg
  kvrt::cli::LoadFlags load;
  std::string model_name;
  std::string chat_template;
  kvrt::serve::ServerOptions server;
};

int fail(const kvrt::Status& status) {
  std::fprintf(stderr, "kvrt serve: %s\n", status.to_string().c_str());
  return 1;
}

// The id clients send: org/name for a hub reference, else the file or directory name.
std::string default_model_name(const std::string& path, const kvrt::cli::ModelArg& given) {
  const std::string reference = given.get().ok() ? *given.get() : path;
  if (reference != path && !std::filesystem::exists(reference)) {
    return reference.substr(0, reference.find('@'));
  }
  std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  // A directory's whole name ("Qwen2.5-0.5B"); a program file's without ".kvrt".
  const std::string stem =
      std::filesystem::is_directory(path) ? normal.filename().string() : normal.stem().string();
  return stem.empty() ? "model" : stem;
}

int serve(ServeArgs& args) {
  // Signals go to one thread that waits for them, so shutdown runs as ordinary code
  // (locks, joins) instead of inside a handler. Blocked before any thread starts, so
  // every thread inherits the mask. SIGPIPE: a client that left is an error return.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // sent to ourselves when the server ends on its own
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto load = kvrt::cli::load_options(args.load);
  if (!load.ok()) return fail(load.status());
  load->require_tokenizer = true;
  auto llm = kvrt::Llm::load(args.model, *load);
  if (!llm.ok()) return fail(llm.status());
  auto chat_template = kvrt::serve::load_chat_template(args.model, args.chat_template, **llm);
  if (!chat_template.ok()) return fail(chat_template.status());
  const std::string name =
      args.model_name.empty() ? default_model_name(args.model, args.model_arg) : args.model_name;
  if (!*chat_template) {
    std::fprintf(stderr,
                 "kvrt serve: '%s' has no chat template: /v1/chat/completions will refuse "
                 "requests (give --chat-template FILE)\n",
                 name.c_str());
  }
  kvrt::serve::CompletionService service(**llm, std::move(*chat_template), name);
  auto server = kvrt::serve::Server::bind(service, args.server);
  if (!server.ok()) return fail(server.status());

  std::thread watcher([&server, &signals] {
    int received = 0;
    sigwait(&signals, &received);
    if (received != SIGUSR1) std::fprintf(stderr, "kvrt serve: shutting down\n");
    (*server)->shutdown();
  });
  std::fprintf(stderr, "kvrt serve: listening on http://%s:%d (model %s, device %s)\n",
               args.server.host.c_str(), (*server)->port(), name.c_str(),
               (*llm)->device_choice().c_str());
  std::fflush(stderr);
  const kvrt::Status served = (*server)->serve();
  pthread_kill(watcher.native_handle(), SIGUSR1);  // no-op wake when a signal ended it
  watcher.join();
  if (!served.ok()) return fail(served);
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App& sub) {
       auto args = std::make_shared<ServeArgs>();
       kvrt::cli::add_model_arg(sub, args->model_arg);
       sub.add_option("--host", args->server.host, "Address to listen on (default 127.0.0.1)");
       sub.add_option("--port", args->server.port, "Port (0: any free port)")
           ->check(CLI::Range(0, 65535));
       sub.add_option("--chat-template", args->chat_template,
                      "Chat template: a .jinja file, tokenizer_config.json or model directory");
       sub.add_option("--api-key", args->server.api_key,
                      "Require 'Authorization: Bearer KEY' on /v1 requests");
       sub.add_option("--queue", args->server.queue,
                      "Requests that may wait behind the running one (more: 503)")
           ->check(CLI::Range(0, 4096));
       sub.add_option("--model-name", args->model_name, "Model id reported and accepted");
       kvrt::cli::add_load_flags(sub, args->load);
       sub.footer(
           "Endpoints: /v1/chat/completions and /v1/completions (streamed or not), /v1/models,\n"
           "/health and Prometheus /metrics. Requests run one at a time in arrival order; a\n"
           "full queue answers 503. Sampling follows OpenAI's API: each request's temperature,\n"
           "top_p and seed (OpenAI's defaults where a request leaves them out). SIGINT or\n"
           "SIGTERM shuts down cleanly. Design and limits: docs/serve.md.\n\n"
           "Examples:\n"
           "  kvrt serve models/fortune-llama --chat-template tests/fixtures/serve/chat.jinja "
           "--port 8080\n"
           "  kvrt serve Qwen/Qwen2.5-0.5B-Instruct --port 0 --api-key secret -ngl 99");
       sub.callback([args] {
         auto path = kvrt::cli::model_path_or_report(args->model_arg, "serve");
         if (!path) return kvrt::cli::set_exit_code(1);
         args->model = *path;
         kvrt::cli::set_exit_code(serve(*args));
       });
     }});

}  // namespace
