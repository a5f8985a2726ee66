// `launch --local`'s node supervision against a fake process table: which devices each node
// hosts, crashes seen and restarted only when the controller has let go, the stop at the end.
#include <catch2/catch.hpp>

#include <map>

#include "launch/node_supervisor.hpp"

using namespace dynapar::launch;

namespace {

// Processes as a table the test changes by hand.
struct fake_table : process_table {
  struct proc {
    std::string name;
    std::vector<int> devices;
    state now = state::running;
    bool reaped = false, killed = false;
  };
  std::map<int, proc> procs;
  int next = 100;
  int start(const std::string& name, const std::vector<int>& devices) override {
    procs[next] = {name, devices};
    return next++;
  }
  state poll(int h) override {
    auto& p = procs.at(h);
    REQUIRE_FALSE(p.reaped);  // a handle is not polled after its process was reaped
    if (p.now != state::running) p.reaped = true;
    return p.now;
  }
  void kill(int h) override {
    auto& p = procs.at(h);
    REQUIRE_FALSE(p.reaped);
    p.killed = p.reaped = true;
  }
  int running() const {
    int n = 0;
    for (const auto& [h, p] : procs) n += !p.reaped;
    return n;
  }
};

const auto none_held = [](int) { return false; };

}  // namespace

TEST_CASE("the job's devices go round-robin over the nodes, and a node without one is not started", "[unit][launch]") {
  fake_table os;
  node_supervisor all(os, {2, {}, -1}, {0, 1, 2, 3, 4});
  CHECK(all.devices() == std::vector<std::vector<int>>{{0, 2, 4}, {1, 3}});
  node_supervisor some(os, {3, {3, 1}, -1}, {0, 1, 2, 3, 4});
  CHECK(some.devices() == std::vector<std::vector<int>>{{1}, {3}});
  some.start();
  REQUIRE(os.procs.size() == 2);
  CHECK(os.procs.at(100).name == "node-0");
  CHECK(os.procs.at(100).devices == std::vector<int>{1});
  CHECK(os.procs.at(101).devices == std::vector<int>{3});
}

TEST_CASE("a crashed node starts again once its time has passed and the controller let go of its devices", "[unit][launch]") {
  fake_table os;
  node_supervisor s(os, {2, {}, 1.0}, {0, 1, 2});
  s.start();
  CHECK(s.poll(5.0).empty());
  os.procs.at(100).now = process_table::state::failed;  // node-0, devices 0 and 2: killed
  os.procs.at(101).now = process_table::state::exited;  // node-1 left cleanly: not restarted
  const auto crashed = s.poll(10.0);
  REQUIRE(crashed.size() == 1);
  CHECK(crashed[0].find("('node-0') failed") != std::string::npos);
  CHECK(s.all_ended());
  CHECK(s.respawn(10.5, none_held).empty());  // before respawn_s
  bool held = true;
  CHECK(s.respawn(11.5, [&](int id) { return held && id == 2; }).empty());  // still hosted by the controller
  held = false;
  CHECK(s.respawn(12.0, [&](int id) { return held && id == 2; }) == std::vector<std::string>{"node-0-r1"});
  REQUIRE(os.procs.size() == 3);
  CHECK(os.procs.at(102).devices == std::vector<int>{0, 2});
  CHECK(s.respawn(20.0, none_held).empty());  // once
  CHECK_FALSE(s.all_ended());
  // At the end what still runs is stopped; what ended is left alone.
  s.kill_rest();
  CHECK(os.procs.at(102).killed);
  CHECK_FALSE(os.procs.at(101).killed);
  CHECK(os.running() == 0);
  CHECK(s.all_ended());
}

TEST_CASE("without --respawn-s a crashed node stays down", "[unit][launch]") {
  fake_table os;
  node_supervisor s(os, {1, {}, -1}, {0});
  s.start();
  os.procs.at(100).now = process_table::state::failed;
  CHECK(s.poll(1.0).size() == 1);
  CHECK(s.respawn(100.0, none_held).empty());
  CHECK(os.procs.size() == 1);
}

TEST_CASE("for a job without devices every node starts naming none (it describes its own), and restarts so", "[unit][launch]") {
  fake_table os;
  supervisor_config cfg{3, {}, 1.0};
  cfg.described = true;
  node_supervisor s(os, cfg, {0, 1, 2, 3, 4, 5, 6, 7});  // the job's pool: not handed out
  CHECK(s.devices() == std::vector<std::vector<int>>{{}, {}, {}});
  s.start();
  REQUIRE(os.procs.size() == 3);
  for (const auto& [h, p] : os.procs) CHECK(p.devices.empty());
  CHECK(os.procs.at(102).name == "node-2");
  os.procs.at(101).now = process_table::state::failed;
  CHECK(s.poll(1.0).size() == 1);
  // Its device had an id of its own: the new node describes another, whatever the controller holds.
  CHECK(s.respawn(2.5, [](int) { return true; }) == std::vector<std::string>{"node-1-r1"});
  CHECK(os.procs.at(103).devices.empty());
}
