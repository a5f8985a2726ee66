// The resident-memory cap: its variable parsed and refused by name, and the watch calling
// `over` once, with the first reading over the cap, never for readings at or under it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/memory_cap.hpp"
#include "common/memory_peak.hpp"

using namespace dynapar;

TEST_CASE("DYNAPAR_MAX_RSS_MB: none, a size, and bad values named") {
  CHECK(*rss_cap_from_env(nullptr) == 0);
  CHECK(*rss_cap_from_env("") == 0);
  CHECK(*rss_cap_from_env("300") == 300);
  for (const char* bad : {"0", "-5", "3.5", "12x", "99999999999"}) {
    auto r = rss_cap_from_env(bad);
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("DYNAPAR_MAX_RSS_MB") != std::string::npos);
    CHECK(r.err().message.find(bad) != std::string::npos);
  }
}

TEST_CASE("the memory watch calls `over` once, with the first reading over the cap") {
  const std::vector<double> readings = {50, 100, 99.5, 100.5, 180, 20};
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::vector<double> calls;
  {
    rss_watch w({100, std::chrono::milliseconds(1), [&] { return readings[std::min(next++, readings.size() - 1)]; },
                 [&](double rss) {
                   std::lock_guard<std::mutex> lock(mu);
                   calls.push_back(rss);
                 }});
    for (int i = 0; i < 2000 && next < readings.size(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::lock_guard<std::mutex> lock(mu);
  CHECK(calls == std::vector<double>{100.5});  // 100 is at the cap, not over it
  CHECK(next == 4u);                           // and it read nothing after
}

TEST_CASE("a watch under its cap never calls, and stops when destroyed") {
  std::atomic<int> reads{0}, over{0};
  {
    rss_watch w({1e9, std::chrono::milliseconds(1), [&] { return ++reads, resident_mb(); }, [&](double) { ++over; }});
    while (reads < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int at_stop = reads;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(over == 0);
  CHECK(reads == at_stop);
  CHECK(resident_mb() > 0);  // this process's VmRSS, read from /proc
}
