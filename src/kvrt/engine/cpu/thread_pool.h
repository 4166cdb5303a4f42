// A small fixed pool of worker threads for the CPU engine's data-parallel loops
// (linear over output rows, attention over heads). The calling thread takes part, so a
// pool of size 1 has no workers and runs everything inline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvrt::engine::cpu {

class ThreadPool {
 public:
  // `num_threads` counts the caller: 0 picks min(hardware threads, 8).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), each at least `grain`
  // long (except the last), and returns when all are done. Chunks never depend on the
  // thread count for their results: each output is computed by exactly one call. When
  // another thread is already using the pool, this runs inline instead of waiting.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;
  int64_t next_chunk_ = 0;
  int64_t num_chunks_ = 0;
  int64_t chunks_done_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

// A process-wide pool per thread count, shared by every engine that asks for it (the
// prefill and decode engines of one program run one at a time anyway).
std::shared_ptr<ThreadPool> shared_thread_pool(int num_threads);

}  // namespace kvrt::engine::cpu
