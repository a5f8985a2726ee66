// The serial lane a device's Gloo communicator runs on (common/serial_lane.hpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "common/serial_lane.hpp"

TEST_CASE("a serial lane runs its jobs in order off the caller's thread, and a closed one ends after them", "[unit]") {
  std::vector<int> ran;
  std::thread::id where;
  {
    dynapar::serial_lane lane;
    for (int i = 0; i < 50; ++i)
      lane.submit([&, i] {
        if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // later jobs queue behind it
        where = std::this_thread::get_id();
        ran.push_back(i);
      });
    CHECK_FALSE(lane.ended());
    lane.close();  // does not wait
    for (int k = 0; k < 500 && !lane.ended(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CHECK(lane.ended());
  }
  REQUIRE(ran.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(ran[static_cast<std::size_t>(i)] == i);
  CHECK(where != std::this_thread::get_id());
}
