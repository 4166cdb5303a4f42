#include "kvrt/serve/turn_queue.h"

#include <algorithm>
#include <chrono>

namespace kvrt::serve {

std::unique_ptr<TurnQueue::Ticket> TurnQueue::enter() {
  std::lock_guard lock(mutex_);
  if (closed_ || waiting_.size() >= capacity_) return nullptr;
  const uint64_t number = next_number_++;
  waiting_.push_back(number);
  return std::unique_ptr<Ticket>(new Ticket(*this, number));
}

bool TurnQueue::Ticket::wait_turn(const std::function<bool()>& give_up, int poll_ms) {
  std::unique_lock lock(queue_.mutex_);
  while (true) {
    if (queue_.closed_) return false;
    if (!queue_.running_ && queue_.waiting_.front() == number_) {
      queue_.waiting_.pop_front();
      queue_.running_ = true;
      running_ = true;
      return true;
    }
    queue_.changed_.wait_for(lock, std::chrono::milliseconds(poll_ms));
    if (give_up) {
      // The check may be a system call (is the client still there?): run it unlocked.
      lock.unlock();
      const bool stop = give_up();
      lock.lock();
      if (stop) return false;
    }
  }
}

TurnQueue::Ticket::~Ticket() {
  queue_.leave(*this);
}

void TurnQueue::leave(const Ticket& ticket) {
  {
    std::lock_guard lock(mutex_);
    if (ticket.running_) {
      running_ = false;
    } else {
      waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), ticket.number_), waiting_.end());
    }
  }
  changed_.notify_all();
}

void TurnQueue::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

size_t TurnQueue::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

bool TurnQueue::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

}  // namespace kvrt::serve
