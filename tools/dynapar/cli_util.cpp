#include "cli_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <iostream>

#include "commands.hpp"

namespace dynapar::cli {

int report(const error& e) {
  std::cerr << "dynapar: " << e.message << "\n";
  const bool input = e.code.rfind("bad_", 0) == 0 || e.code == "io" || e.code.rfind("unknown_", 0) == 0;
  return input ? exit_usage : exit_failed;
}

pid_t spawn_self(std::vector<std::string> args, const std::string& log, bool own_group) {
  // Built before the fork: between fork and exec the child may only make async-signal-safe
  // calls (another thread may have held the allocator's lock when the process forked).
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* log_path = log.c_str();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (own_group) setpgid(0, 0);
  if (*log_path) {
    const int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
  }
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

}  // namespace dynapar::cli
