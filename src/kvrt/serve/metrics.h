// The server's counters, exposed at GET /metrics in Prometheus' text format: requests
// by endpoint and status, tokens in and out (and reused from the cache), the queue's
// length, and a histogram of time to first token. Updated from many threads: atomics
// and one mutex for the by-status map.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace kvrt::serve {

class Metrics {
 public:
  void count_request(const std::string& endpoint, int status);
  void add_tokens(int64_t prompt, int64_t completion, int64_t cached);
  void observe_time_to_first_token(double seconds);
  void count_cancelled() { cancelled_.fetch_add(1); }

  // queue_waiting / running: read from the TurnQueue when the page is rendered.
  std::string render(size_t queue_waiting, bool running, size_t queue_capacity) const;

  int64_t requests(const std::string& endpoint, int status) const;

  // Upper bounds of the time-to-first-token buckets, in seconds (+Inf is implied).
  static constexpr std::array<double, 10> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1,
                                                      0.25,  0.5,  1.0,   2.5,  10.0};

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<int64_t> completion_tokens_{0};
  std::atomic<int64_t> cached_tokens_{0};
  std::atomic<int64_t> cancelled_{0};
  std::array<std::atomic<int64_t>, kBuckets.size() + 1> ttft_buckets_{};
  std::atomic<int64_t> ttft_count_{0};
  std::atomic<int64_t> ttft_sum_us_{0};
};

}  // namespace kvrt::serve
