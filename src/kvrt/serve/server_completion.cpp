// POST /v1/chat/completions and /v1/completions: check, tokenize, wait for the turn,
// generate, answer with one JSON body or a stream of server-sent events.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "kvrt/serve/connection_probe.h"
#include "kvrt/serve/responses.h"
#include "kvrt/serve/server_impl.h"

namespace kvrt::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Marks a request's socket busy while the request lives (see Impl::busy_sockets).
class BusySocket {
 public:
  BusySocket(Server::Impl& impl, std::optional<int> fd) : impl_(impl), fd_(fd) {
    if (!fd_) return;
    std::lock_guard lock(impl_.busy_mutex);
    impl_.busy_sockets.insert(*fd_);
  }
  ~BusySocket() {
    if (!fd_) return;
    std::lock_guard lock(impl_.busy_mutex);
    impl_.busy_sockets.erase(*fd_);
  }
  BusySocket(const BusySocket&) = delete;
  BusySocket& operator=(const BusySocket&) = delete;

 private:
  Server::Impl& impl_;
  std::optional<int> fd_;
};

// Everything one request needs once it has its turn; shared with the stream's
// content provider, which runs after the handler has returned.
struct Job {
  CompletionRequest request;
  std::vector<int32_t> ids;
  GenerateOptions options;
  ResponseHeader header;
  std::unique_ptr<TurnQueue::Ticket> ticket;
  ConnectionProbe probe = ConnectionProbe::of_socket(-1);
  std::unique_ptr<BusySocket> busy;
  Clock::time_point arrived;
  std::string endpoint;  // for metrics
};

std::string make_id(Server::Impl& impl, Endpoint endpoint) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  char id[64];
  std::snprintf(id, sizeof(id), "%s-%llx%04llx", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(random() & 0xffffffffffULL),
                static_cast<unsigned long long>(impl.next_id.fetch_add(1) & 0xffff));
  return id;
}

ApiError shutting_down() {
  ApiError error;
  error.status = 503;
  error.type = "server_error";
  error.code = "shutting_down";
  error.message = "the server is shutting down";
  return error;
}

Usage usage_of(const Job& job, const GenerationResult& result) {
  Usage usage;
  usage.prompt_tokens = static_cast<int32_t>(job.ids.size());
  usage.completion_tokens = result.stats.generated_tokens;
  usage.cached_tokens = result.stats.cached_tokens;
  return usage;
}

void record(Server::Impl& impl, const Job& job, const GenerationResult& result) {
  const Usage usage = usage_of(job, result);
  impl.metrics.add_tokens(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens);
  if (result.stats.generated_tokens > 0) {
    // Arrival to first token: time in the queue plus the model's own.
    const double waited = std::chrono::duration<double>(Clock::now() - job.arrived).count() -
                          (result.stats.prefill_ms + result.stats.decode_ms) / 1000.0;
    impl.metrics.observe_time_to_first_token(std::max(0.0, waited) +
                                             result.stats.time_to_first_token_ms / 1000.0);
  }
}

// Runs the job's generation; `emit` gets each piece of text and returns false when
// the client can no longer take it. cancelled: the client left or the server stops.
Result<GenerationResult> run(Server::Impl& impl, Job& job,
                             const std::function<bool(std::string_view)>& emit, bool& cancelled) {
  cancelled = false;
  auto result = impl.service.generate(job.ids, job.options, [&](std::string_view text, int32_t) {
    if (impl.stopping.load() || job.probe.peer_closed() || (emit && !emit(text))) {
      cancelled = true;
      return false;
    }
    return true;
  });
  // The server's stop also asks the generator to stop between tokens, which ends the
  // generation with no reason of its own: that is a cancelled reply, not a finished one.
  if (impl.stopping.load() && result.ok() && result->stats.stop_reason == StopReason::kNone) {
    cancelled = true;
  }
  return result;
}

void answer_whole(Server::Impl& impl, Job& job, httplib::Response& response) {
  bool cancelled = false;
  auto result = run(impl, job, {}, cancelled);
  job.ticket.reset();  // the next request may start while this one is written out
  if (cancelled && impl.stopping.load())
    return send_error(impl, job.endpoint, response, shutting_down());
  if (cancelled) {
    impl.metrics.count_cancelled();
    response.status = 499;  // nobody reads it: the client has gone
    return;
  }
  if (!result.ok()) {
    ApiError error;
    error.status = 500;
    error.type = "server_error";
    error.message = result.status().to_string();
    return send_error(impl, job.endpoint, response, error);
  }
  record(impl, job, *result);
  send_json(response, 200,
            completion_body(job.header, result->text, finish_reason(result->stats.stop_reason),
                            usage_of(job, *result)));
  impl.metrics.count_request(job.endpoint, 200);
}

// The whole stream, written from the provider's one call.
void stream(Server::Impl& impl, Job& job, httplib::DataSink& sink) {
  bool first = true;
  const bool usage_null = job.request.include_usage;
  auto write = [&](const std::string& event) { return sink.write(event.data(), event.size()); };
  bool cancelled = false;
  auto result = run(
      impl, job,
      [&](std::string_view text) {
        const bool ok =
            write(sse_event(chunk_body(job.header, text, std::nullopt, first, usage_null)));
        first = false;
        return ok;
      },
      cancelled);
  job.ticket.reset();
  if (cancelled && !impl.stopping.load()) {
    impl.metrics.count_cancelled();
    return;
  }
  if (!result.ok() || cancelled) {
    ApiError error = shutting_down();
    if (!result.ok()) {
      error.status = 500;
      error.code.clear();
      error.message = result.status().to_string();
    }
    write(sse_event(error.to_json()));
    write(sse_done());
    return;
  }
  record(impl, job, *result);
  write(sse_event(
      chunk_body(job.header, "", finish_reason(result->stats.stop_reason), first, usage_null)));
  if (job.request.include_usage)
    write(sse_event(usage_chunk_body(job.header, usage_of(job, *result))));
  write(sse_done());
}

}  // namespace

void handle_completion(Server::Impl& impl, Endpoint endpoint, const httplib::Request& request,
                       httplib::Response& response) {
  auto job = std::make_shared<Job>();
  job->arrived = Clock::now();
  job->endpoint = endpoint == Endpoint::kChat ? "chat_completions" : "completions";
  ParsedRequest parsed = parse_request(request.body, endpoint);
  if (auto* error = std::get_if<ApiError>(&parsed))
    return send_error(impl, job->endpoint, response, *error);
  job->request = std::move(std::get<CompletionRequest>(parsed));
  if (!job->request.model.empty() && job->request.model != impl.service.model_name()) {
    ApiError error = bad_field("model", "the model '" + job->request.model +
                                            "' does not exist; this server has '" +
                                            impl.service.model_name() + "'");
    error.status = 404;
    error.code = "model_not_found";
    return send_error(impl, job->endpoint, response, error);
  }
  auto ids = impl.service.prompt_ids(job->request);
  if (auto* error = std::get_if<ApiError>(&ids))
    return send_error(impl, job->endpoint, response, *error);
  job->ids = std::move(std::get<std::vector<int32_t>>(ids));
  job->options = impl.service.options_for(job->request, job->ids.size());
  job->header = {endpoint, make_id(impl, endpoint),
                 std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count(),
                 impl.service.model_name()};

  job->ticket = impl.queue.enter();
  if (!job->ticket) {
    if (impl.stopping.load()) return send_error(impl, job->endpoint, response, shutting_down());
    ApiError error;
    error.status = 503;
    error.type = "server_error";
    error.code = "queue_full";
    error.message = "the server is busy: " + std::to_string(impl.queue.capacity()) +
                    " requests are already waiting; retry later";
    response.set_header("Retry-After", "1");
    return send_error(impl, job->endpoint, response, error);
  }
  job->probe = ConnectionProbe::find(request.local_port, request.remote_addr, request.remote_port);
  job->busy = std::make_unique<BusySocket>(impl, job->probe.fd());
  const bool turn = job->ticket->wait_turn(
      [&impl, job] { return impl.stopping.load() || job->probe.peer_closed(); });
  if (!turn) {
    if (impl.stopping.load()) return send_error(impl, job->endpoint, response, shutting_down());
    impl.metrics.count_cancelled();
    response.status = 499;
    return;
  }
  if (!job->request.stream) return answer_whole(impl, *job, response);

  impl.metrics.count_request(job->endpoint, 200);
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [&impl, job](size_t, httplib::DataSink& sink) {
        stream(impl, *job, sink);
        sink.done();
        return true;
      },
      // Also when the provider never runs (the client left first): give the turn back.
      [job](bool) { job->ticket.reset(); });
}

}  // namespace kvrt::serve
