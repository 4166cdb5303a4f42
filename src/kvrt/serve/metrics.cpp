#include "kvrt/serve/metrics.h"

#include <cstdio>
#include <sstream>

namespace kvrt::serve {

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

int64_t Metrics::requests(const std::string& endpoint, int status) const {
  std::lock_guard lock(mutex_);
  auto it = requests_.find({endpoint, status});
  return it == requests_.end() ? 0 : it->second;
}

void Metrics::add_tokens(int64_t prompt, int64_t completion, int64_t cached) {
  prompt_tokens_.fetch_add(prompt);
  completion_tokens_.fetch_add(completion);
  cached_tokens_.fetch_add(cached);
}

void Metrics::observe_time_to_first_token(double seconds) {
  size_t bucket = 0;
  while (bucket < kBuckets.size() && seconds > kBuckets[bucket]) ++bucket;
  ttft_buckets_[bucket].fetch_add(1);
  ttft_count_.fetch_add(1);
  ttft_sum_us_.fetch_add(static_cast<int64_t>(seconds * 1e6));
}

std::string Metrics::render(size_t queue_waiting, bool running, size_t queue_capacity) const {
  std::ostringstream out;
  out << "# HELP kvrt_requests_total HTTP requests by endpoint and status.\n"
      << "# TYPE kvrt_requests_total counter\n";
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, count] : requests_) {
      out << "kvrt_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second
          << "\"} " << count << "\n";
    }
  }
  auto counter = [&](const char* name, const char* help, int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n"
        << name << " " << value << "\n";
  };
  counter("kvrt_prompt_tokens_total", "Prompt tokens of served requests (reused ones included).",
          prompt_tokens_.load());
  counter("kvrt_cached_prompt_tokens_total", "Prompt tokens reused from the KV cache.",
          cached_tokens_.load());
  counter("kvrt_completion_tokens_total", "Generated tokens.", completion_tokens_.load());
  counter("kvrt_cancelled_requests_total", "Generations stopped because the client left.",
          cancelled_.load());
  auto gauge = [&](const char* name, const char* help, int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n"
        << name << " " << value << "\n";
  };
  gauge("kvrt_queue_length", "Requests waiting for the model.",
        static_cast<int64_t>(queue_waiting));
  gauge("kvrt_queue_capacity", "Most requests that may wait.",
        static_cast<int64_t>(queue_capacity));
  gauge("kvrt_requests_running", "Requests the model is generating for (0 or 1).", running ? 1 : 0);
  out << "# HELP kvrt_time_to_first_token_seconds From a request's arrival to its first token "
         "(queue wait included).\n"
      << "# TYPE kvrt_time_to_first_token_seconds histogram\n";
  int64_t cumulative = 0;
  char bound[32];
  for (size_t i = 0; i <= kBuckets.size(); ++i) {
    cumulative += ttft_buckets_[i].load();
    if (i < kBuckets.size()) {
      std::snprintf(bound, sizeof(bound), "%g", kBuckets[i]);
    } else {
      std::snprintf(bound, sizeof(bound), "+Inf");
    }
    out << "kvrt_time_to_first_token_seconds_bucket{le=\"" << bound << "\"} " << cumulative << "\n";
  }
  char sum[32];
  std::snprintf(sum, sizeof(sum), "%.6f", static_cast<double>(ttft_sum_us_.load()) / 1e6);
  out << "kvrt_time_to_first_token_seconds_sum " << sum << "\n"
      << "kvrt_time_to_first_token_seconds_count " << ttft_count_.load() << "\n";
  return out.str();
}

}  // namespace kvrt::serve
