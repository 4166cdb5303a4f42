#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "kvrt/engine/cpu/thread_pool.h"

namespace kvrt::engine::cpu {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 3, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ConcurrentCallersBothFinish) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int r = 0; r < 50; ++r) {
      pool.parallel_for(100, 1, [&](int64_t b, int64_t e) { total += e - b; });
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 50 * 100);
}

TEST(ThreadPool, SharedPoolsAreReusedPerThreadCount) {
  auto a = shared_thread_pool(2);
  auto b = shared_thread_pool(2);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a->num_threads(), 2);
}

}  // namespace
}  // namespace kvrt::engine::cpu
