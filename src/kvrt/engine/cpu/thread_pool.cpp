#include "kvrt/engine/cpu/thread_pool.h"

#include <algorithm>
#include <map>
#include <system_error>

#include "kvrt/core/log.h"

namespace kvrt::engine::cpu {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) {
    num_threads = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  }
  for (int i = 1; i < num_threads; ++i) {
    try {
      workers_.emplace_back([this, i] { worker_loop(i); });
    } catch (const std::system_error& error) {
      // The system gave no more threads: run with those it gave, never throw.
      log(LogLevel::kWarn, "CPU thread pool: ", num_threads, " threads asked, started ", i, " (",
          error.what(), ")");
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  std::unique_lock run_lock(run_mutex_, std::try_to_lock);
  if (workers_.empty() || max_chunks <= 1 || !run_lock.owns_lock()) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balance uneven rows without much scheduling cost.
  const int64_t chunks = std::min<int64_t>(max_chunks, 4 * num_threads());
  const int64_t chunk = (n + chunks - 1) / chunks;
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    next_chunk_ = 0;
    num_chunks_ = (n + chunk - 1) / chunk;
    chunks_done_ = 0;
    ++generation_;
  }
  start_cv_.notify_all();
  // The caller works too, then waits for the stragglers.
  std::unique_lock lock(mutex_);
  while (next_chunk_ < num_chunks_) {
    const int64_t c = next_chunk_++;
    lock.unlock();
    fn(c * chunk, std::min(n, (c + 1) * chunk));
    lock.lock();
    ++chunks_done_;
  }
  done_cv_.wait(lock, [this] { return chunks_done_ == num_chunks_; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    start_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    while (job_ != nullptr && next_chunk_ < num_chunks_) {
      const int64_t c = next_chunk_++;
      const auto* job = job_;
      const int64_t n = job_n_, chunk = job_chunk_;
      lock.unlock();
      (*job)(c * chunk, std::min(n, (c + 1) * chunk));
      lock.lock();
      if (++chunks_done_ == num_chunks_) done_cv_.notify_all();
    }
  }
}

std::shared_ptr<ThreadPool> shared_thread_pool(int num_threads) {
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<ThreadPool>> pools;
  std::lock_guard lock(mutex);
  std::weak_ptr<ThreadPool>& slot = pools[num_threads];
  std::shared_ptr<ThreadPool> pool = slot.lock();
  if (!pool) {
    pool = std::make_shared<ThreadPool>(num_threads);
    slot = pool;
  }
  return pool;
}

}  // namespace kvrt::engine::cpu
