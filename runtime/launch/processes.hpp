// Processes of this same binary: `dynapar launch` starts its nodes, `dynapar chaos` its runs,
// `dynapar bench sum` its workers.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launch/node_supervisor.hpp"

namespace dynapar::launch {

// Starts this same binary (/proc/self/exe) with `args` (argv[0] first) as a child process: a
// fresh dynapar. `log`: its stdout and stderr appended there ("": inherited). `own_group`: it
// leads a process group of its own, so that kill(-pid) also reaches the processes it starts.
// The pid, or -1.
pid_t spawn_self(std::vector<std::string> args, const std::string& log = "", bool own_group = false);

// `dynapar node --controller ENDPOINT --name NAME [--keys DIR] --device ID ...`, one process each.
class posix_nodes : public process_table {
 public:
  // `extra`: arguments every node gets (--data-dir DIR for the job's own data files).
  posix_nodes(std::string endpoint, std::string keys, std::vector<std::string> extra = {})
      : endpoint_(std::move(endpoint)), keys_(std::move(keys)), extra_(std::move(extra)) {}
  int start(const std::string& name, const std::vector<int>& devices) override;
  state poll(int handle) override;
  void kill(int handle) override;

 private:
  std::string endpoint_, keys_;
  std::vector<std::string> extra_;
};

}  // namespace dynapar::launch
