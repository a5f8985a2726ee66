// What a terminal and a browser see of a run while it goes (`dynapar train`, `controller`,
// `launch`): one status line kept up to date on a terminal (plain lines in a log), a log line
// per new plan and per epoch, and the live dashboard when asked; after the run, the human
// summary and --verify's verdict. The session (training/session.hpp) does the rest.
#pragma once

#include <memory>

#include "cli_util.hpp"
#include "common/result.hpp"
#include "live_dashboard.hpp"
#include "report/progress.hpp"
#include "train_job.hpp"
#include "training/session.hpp"

namespace dynapar::cli {

class run_console {
 public:
  // Starts the dashboard when o.dashboard_port asks for one (its address in OUT/dashboard.url).
  static result<std::unique_ptr<run_console>> start(const train_options& o, const training::prepared_job& prep);
  // The session's watch: these lines and the dashboard, the wall clock and the process's usage.
  training::session_watch watch();
  // The dashboard's last state, the summary on stdout, and the verdicts on stderr; the exit code.
  int finish(const training::session_outcome& done, const training::session_options& o);

 private:
  run_console(std::int64_t steps, int batch, std::string metric);
  void log_line(const std::string& line);  // not inside the status line

  report::progress_meter meter_;
  std::unique_ptr<live_dashboard> board_;
  std::string metric_;  // model::metric_name of the test set
  std::int64_t steps_, steps_per_epoch_ = 1;
  bool tty_ = false, status_shown_ = false;
  stopwatch clock_;
};

}  // namespace dynapar::cli
