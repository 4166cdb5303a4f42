// TurnQueue: first come first served, bounded, and no waiter outlives its client or
// the server.
#include "kvrt/serve/turn_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace kvrt::serve {
namespace {

TEST(TurnQueue, TicketsRunOneAtATimeInArrivalOrder) {
  TurnQueue queue(8);
  auto first = queue.enter();
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->wait_turn({}));  // nobody ahead
  std::vector<std::unique_ptr<TurnQueue::Ticket>> tickets;
  for (int i = 0; i < 5; ++i) tickets.push_back(queue.enter());
  std::mutex mutex;
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
  std::vector<std::thread> threads;
  // Started in reverse, so arrival order (not start order) must decide.
  for (int i = 4; i >= 0; --i) {
    threads.emplace_back([&, i] {
      ASSERT_TRUE(tickets[i]->wait_turn({}, 5));
      most_running.store(std::max(most_running.load(), ++running));
      {
        std::lock_guard lock(mutex);
        order.push_back(i);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --running;
      tickets[i].reset();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(queue.waiting(), 5u);
  first.reset();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(most_running.load(), 1);
  EXPECT_EQ(queue.waiting(), 0u);
  EXPECT_FALSE(queue.running());
}

TEST(TurnQueue, FullQueueRefusesAtOnce) {
  TurnQueue queue(2);
  auto running = queue.enter();
  ASSERT_TRUE(running->wait_turn({}));
  auto a = queue.enter();
  auto b = queue.enter();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(queue.enter());  // 2 waiting: full
  a.reset();                    // a waiter leaves: room again
  EXPECT_TRUE(queue.enter());
}

TEST(TurnQueue, WaiterGivesUpWhenItsClientHasGone) {
  TurnQueue queue(4);
  auto running = queue.enter();
  ASSERT_TRUE(running->wait_turn({}));
  auto waiter = queue.enter();
  std::atomic<bool> gone{false};
  std::thread client([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gone.store(true);
  });
  EXPECT_FALSE(waiter->wait_turn([&] { return gone.load(); }, 5));
  client.join();
  waiter.reset();
  EXPECT_EQ(queue.waiting(), 0u);
  // The one that gave up does not block the next.
  auto next = queue.enter();
  running.reset();
  EXPECT_TRUE(next->wait_turn({}, 5));
}

TEST(TurnQueue, CloseWakesEveryWaiterAndRefusesNewTickets) {
  TurnQueue queue(4);
  auto running = queue.enter();
  ASSERT_TRUE(running->wait_turn({}));
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      auto ticket = queue.enter();
      if (ticket && !ticket->wait_turn({}, 1000)) ++refused;
    });
  }
  while (queue.waiting() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = std::chrono::steady_clock::now();
  queue.close();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(refused.load(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_FALSE(queue.enter());
}

}  // namespace
}  // namespace kvrt::serve
