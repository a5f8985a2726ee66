#include "cli_util.hpp"

#include "common/mapped_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <thread>

#include "commands.hpp"
#include "common/memory_peak.hpp"

namespace dynapar::cli {

int report_exit(const error& e) {
  const bool input = e.code.rfind("bad_", 0) == 0 || e.code == "io" || e.code.rfind("unknown_", 0) == 0;
  return input ? exit_usage : exit_failed;
}

int run_gnuplot(const std::string& dir, const std::string& script, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    if (chdir(dir.c_str()) != 0) _exit(126);
    if (!log.empty()) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, STDERR_FILENO);
    }
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int wait_run(pid_t pid, double timeout_s, const std::function<bool()>& stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      kill(-pid, SIGKILL);  // nodes left behind, if any
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    if (std::chrono::steady_clock::now() > until || (stop && stop())) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

result<std::string> offload_dir_from_env() {
  const char* dir = std::getenv("DYNAPAR_OFFLOAD_OPTIMIZER");
  if (!dir || !*dir) return std::string{};
  if (auto st = check_mapped_dir(dir); !st) return make_error("bad_flag", "--offload-optimizer (DYNAPAR_OFFLOAD_OPTIMIZER): " + st.err().message);
  return std::string(dir);
}

process_usage own_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return {sec(u.ru_utime) + sec(u.ru_stime), peak_rss_mb()};
}

int report(const error& e) {
  std::cerr << "dynapar: " << e.message << "\n";
  return report_exit(e);
}

}  // namespace dynapar::cli
