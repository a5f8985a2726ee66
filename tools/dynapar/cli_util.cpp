#include "cli_util.hpp"

#include <unistd.h>

#include <iostream>

#include "commands.hpp"

namespace dynapar::cli {

int report(const error& e) {
  std::cerr << "dynapar: " << e.message << "\n";
  const bool input = e.code.rfind("bad_", 0) == 0 || e.code == "io" || e.code.rfind("unknown_", 0) == 0;
  return input ? exit_usage : exit_failed;
}

pid_t spawn_self(std::vector<std::string> args) {
  // Built before the fork: between fork and exec the child may only make async-signal-safe
  // calls (another thread may have held the allocator's lock when the process forked).
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

}  // namespace dynapar::cli
