#include "launch/processes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

namespace dynapar::launch {

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

int posix_nodes::start(const std::string& name, const std::vector<int>& devices) {
  std::vector<std::string> args = {"dynapar", "node", "--controller", endpoint_, "--name", name};
  if (!keys_.empty()) {
    args.insert(args.end(), {"--keys", keys_});
    // The node's own key where the directory has one (throwaway keys do); else DIR/node.key.
    const auto own = name.substr(0, name.find("-r"));  // node-3, respawned as node-3-r2: node-3.key
    if (std::filesystem::exists(keys_ + "/" + own + ".key")) args.insert(args.end(), {"--key-name", own});
  }
  for (int d : devices) args.insert(args.end(), {"--device", std::to_string(d)});
  if (devices.empty()) args.insert(args.end(), {"--devices", "auto"});
  args.insert(args.end(), extra_.begin(), extra_.end());
  return spawn_self(std::move(args));
}

process_table::state posix_nodes::poll(int handle) {
  int st = 0;
  if (waitpid(handle, &st, WNOHANG) != handle) return state::running;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? state::exited : state::failed;
}

void posix_nodes::kill(int handle) {
  ::kill(handle, SIGKILL);
  waitpid(handle, nullptr, 0);
}

}  // namespace dynapar::launch
