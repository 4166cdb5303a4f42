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
#include "kvrt/api/kvrt.h"
#include "kvrt/serve/completion_service.h"
#include "kvrt/serve/server.h"

namespace {

struct ServeArgs {
  std::string model;
  std::string model_name;
  std::string chat_template;
  std::string tokenizer;
  std::string device = "auto";
  int threads = 0;
  int64_t max_seq = 0;
  kvrt::serve::ServerOptions server;
};

int fail(const kvrt::Status& status) {
  std::fprintf(stderr, "kvrt serve: %s\n", status.to_string().c_str());
  return 1;
}

std::string default_model_name(const std::string& path) {
  std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  const std::string stem = normal.stem().string();
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

  kvrt::LoadOptions load;
  load.device = args.device;
  load.tokenizer_path = args.tokenizer;
  load.num_threads = args.threads;
  load.max_seq = args.max_seq;
  auto llm = kvrt::Llm::load(args.model, load);
  if (!llm.ok()) return fail(llm.status());
  if (!(*llm)->has_tokenizer()) {
    return fail(kvrt::not_found("no tokenizer.json for '", args.model, "' (--tokenizer)"));
  }
  auto chat_template = kvrt::serve::load_chat_template(args.model, args.chat_template, **llm);
  if (!chat_template.ok()) return fail(chat_template.status());
  const std::string name =
      args.model_name.empty() ? default_model_name(args.model) : args.model_name;
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
       sub.add_option("model", args->model, "Checkpoint directory or .kvrt program")->required();
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
       sub.add_option("--device", args->device, "auto, cpu, cuda or cuda:N");
       sub.add_option("--tokenizer", args->tokenizer, "tokenizer.json (or its directory)");
       sub.add_option("--threads", args->threads, "CPU threads (0 = all cores)")
           ->check(CLI::Range(0, 1024));
       sub.add_option("--max-seq", args->max_seq, "Context length when exporting a checkpoint");
       sub.callback([args] { kvrt::cli::set_exit_code(serve(*args)); });
     }});

}  // namespace
