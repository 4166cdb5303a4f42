// Requests take turns on the one model: a bounded first-in first-out queue of
// tickets. At most one ticket runs at a time; at most `capacity` wait behind it, and
// a request that finds the queue full is refused at once (the server answers 503 with
// Retry-After) instead of piling up threads and memory. A waiting ticket gives up when
// its client has gone or the server is shutting down, so nothing waits forever.
//
//   enter() ──► [ waiting: t3 t4 t5 ] ──► running: t2 ──► ~Ticket() lets t3 run
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace kvrt::serve {

class TurnQueue {
 public:
  explicit TurnQueue(size_t capacity) : capacity_(capacity) {}

  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    // Blocks until this ticket's turn. `give_up` is polled while waiting (every
    // poll_ms); when it returns true, or the queue is closed, the wait ends: false.
    bool wait_turn(const std::function<bool()>& give_up, int poll_ms = 50);

   private:
    friend class TurnQueue;
    Ticket(TurnQueue& queue, uint64_t number) : queue_(queue), number_(number) {}
    TurnQueue& queue_;
    uint64_t number_;
    bool running_ = false;
  };

  // A place in the queue, or nullptr when `capacity` tickets are already waiting or
  // the queue is closed.
  std::unique_ptr<Ticket> enter();
  // Wakes every waiter (they return false) and refuses new tickets; the running one
  // finishes on its own.
  void close();

  size_t waiting() const;
  bool running() const;
  size_t capacity() const { return capacity_; }

 private:
  void leave(const Ticket& ticket);

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<uint64_t> waiting_;  // ticket numbers, oldest first
  uint64_t next_number_ = 0;
  bool running_ = false;
  bool closed_ = false;
};

}  // namespace kvrt::serve
