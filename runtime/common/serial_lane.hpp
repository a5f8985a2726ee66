// One thread that runs jobs in the order they were given: a device's collectives on one
// communicator must be issued in the same order on every rank, and off the device's own
// thread, so that a slow peer does not stall it. close() lets the thread end once it has run
// what was given (a job blocked on a dead peer ends at its own timeout), without waiting;
// the destructor closes and joins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dynapar {

class serial_lane {
 public:
  serial_lane() : thread_([this] { run(); }) {}
  serial_lane(const serial_lane&) = delete;
  serial_lane& operator=(const serial_lane&) = delete;
  ~serial_lane() {
    close();
    thread_.join();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
  }
  bool ended() const { return ended_; }  // closed, and every job run: joining does not wait
  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) {  // closed, and nothing left
          ended_ = true;
          return;
        }
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::atomic<bool> ended_{false};
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace dynapar
