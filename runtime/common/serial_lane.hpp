// One thread that runs jobs in the order they were given: a device's collectives on one
// communicator must be issued in the same order on every rank, and off the device's own
// thread, so that a slow peer does not stall it. The destructor finishes what was given
// (a job blocked on a dead peer ends at its own timeout) and joins.
#pragma once

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
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
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
        if (jobs_.empty()) return;  // stopped, and nothing left
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
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace dynapar
