// The node processes `dynapar launch --local N` starts, watches, restarts after a crash
// (--respawn-s) and stops at the end. Pure: the operating system is behind process_table
// (posix_processes.hpp; an in-process fake in tests) and time is passed in.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace dynapar::launch {

class process_table {
 public:
  enum class state { running, exited, failed };  // failed: a non-zero exit, or killed
  virtual ~process_table() = default;
  // Starts `dynapar node` named `name` hosting `devices` (none: one it describes itself): a
  // handle, or -1 if it could not.
  virtual int start(const std::string& name, const std::vector<int>& devices) = 0;
  // Whether it still runs; an ended process is reaped, and its handle means nothing after.
  virtual state poll(int handle) = 0;
  // Ends it at once (SIGKILL) and reaps it.
  virtual void kill(int handle) = 0;
};

struct supervisor_config {
  int nodes = 0;           // --local N
  std::vector<int> only;   // --devices: which of the job's devices the nodes host (empty: all)
  double respawn_s = -1;   // --respawn-s: a crashed node starts again this long after (< 0: never)
  bool described = false;  // the job lists no devices: each node describes one (--devices auto)
};

class node_supervisor {
 public:
  // The job's devices go round-robin over the nodes; a node left with none is not started.
  // With `described`, every node starts with none named: it describes its own.
  node_supervisor(process_table& os, const supervisor_config& cfg, const std::set<int>& job_devices);

  const std::vector<std::vector<int>>& devices() const { return devices_; }
  void start();
  // Reaps the nodes that ended; returns a line for each that crashed, noting when for respawn().
  std::vector<std::string> poll(double now_s);
  // Starts again each crashed node once respawn_s has passed and the controller no longer
  // holds any of its devices (`held`: it refuses a device it still hosts; it lets go only
  // after its node timeout). Returns the new nodes' names ("node-N-rK").
  std::vector<std::string> respawn(double now_s, const std::function<bool(int)>& held);
  bool all_ended() const;
  void kill_rest();

 private:
  struct node {
    std::string name;
    int handle = -1;         // -1: not running
    double crashed_at = -1;  // >= 0: down, to be started again
  };
  process_table& os_;
  supervisor_config cfg_;
  std::vector<std::vector<int>> devices_;
  std::vector<node> nodes_;
  int restarts_ = 0;
};

}  // namespace dynapar::launch
