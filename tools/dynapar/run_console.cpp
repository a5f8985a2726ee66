#include "run_console.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "comm/packet.hpp"
#include "commands.hpp"
#include "common/memory_cap.hpp"
#include "logging/logging.hpp"
#include "model/api.hpp"
#include "planner/plan.hpp"
#include "report/summary_text.hpp"

namespace dynapar::cli {
namespace fs = std::filesystem;

run_console::run_console(std::int64_t steps, int batch, std::string metric)
    : meter_(steps, batch), metric_(std::move(metric)), steps_(steps), tty_(isatty(STDERR_FILENO)) {}

result<std::unique_ptr<run_console>> run_console::start(const train_options& o, const training::prepared_job& prep) {
  std::unique_ptr<run_console> c(new run_console(prep.settings.steps, prep.settings.batch, model::metric_name(prep.test_set)));
  c->steps_per_epoch_ = std::max(1, prep.train_set.size() / std::max(1, prep.settings.batch));
  if (o.dashboard_port < 0) return c;
  if (!comm::is_loopback(o.dashboard_host) && o.dashboard_token.empty())
    return make_error("bad_flag", "--dashboard-host " + o.dashboard_host +
                                      " is reachable beyond this machine: the run's state needs --dashboard-token TOKEN (or bind 127.0.0.1)");
  std::error_code ec;
  fs::create_directories(o.run.out, ec);
  if (ec) return make_error("io", "cannot create '" + o.run.out + "': " + ec.message());
  auto srv = dashboard::server::start({o.dashboard_host, o.dashboard_port, o.dashboard_token});
  if (!srv) return srv.err();
  c->board_ = std::make_unique<live_dashboard>(std::move(*srv), prep);
  const std::string url = "http://" + o.dashboard_host + ":" + std::to_string(c->board_->port()) + "/";
  // The file (in the user's own directory) has the address to open; the log never shows the token.
  std::ofstream(fs::path(o.run.out) / "dashboard.url") << url << (o.dashboard_token.empty() ? "" : "?token=" + o.dashboard_token) << "\n";
  logging::get("train")->info("dashboard: {} (JSON at {}api/state, Prometheus at {}metrics{})", url, url, url,
                              o.dashboard_token.empty() ? "" : "; each with the token");
  return c;
}

void run_console::log_line(const std::string& line) {
  if (status_shown_) std::cerr << "\r\033[K";
  status_shown_ = false;
  logging::get("train")->info("{}", line);
}

training::session_watch run_console::watch() {
  training::session_watch w;
  w.on_plan = [this](const training::plan_record& r) {
    meter_.plan(planner::brief(r.plan));
    if (board_) board_->plan(r);
    if (r.step > 0)
      log_line(fmt::format("step {}: new plan {} ({} layers moved, {:.1f} MB): {}", r.step, planner::describe(r.plan), r.layers_moved,
                           r.bytes_migrated / 1e6, r.reason));
  };
  w.on_step = [this](const training::step_record& r) {
    meter_.step(r.step, r.time_s, r.loss, clock_.seconds());
    if (board_) board_->step(r, meter_);
    if (tty_) {
      const bool last = r.step + 1 == steps_;
      std::cerr << "\r" << meter_.line() << "\033[K" << (last ? "\n" : "") << std::flush;
      status_shown_ = !last;
    } else if (meter_.plain_due()) {
      logging::get("train")->info("{}", meter_.line());
    }
  };
  w.on_epoch = [this](std::int64_t epoch, double metric, double train_loss) {
    log_line(fmt::format("epoch {}/{}: train loss {:.4f}, test {} {:.4f}", epoch, (steps_ + steps_per_epoch_ - 1) / steps_per_epoch_,
                         train_loss, metric_, metric));
    if (board_) board_->epoch(epoch, metric, metric_);
  };
  w.on_fault = [this](const training::fault_record& r) {
    if (r.event == "injected") meter_.fault();
    if (board_) board_->fault(r);
  };
  w.wall_s = [this] { return clock_.seconds(); };
  w.cpu_s = [] { return own_usage().cpu_s; };
  w.process = [] {
    const auto usage = own_usage();
    nlohmann::json p{{"cpu_s", usage.cpu_s}, {"max_rss_mb", usage.max_rss_mb}};
    if (const auto cap = rss_cap_from_env(std::getenv("DYNAPAR_MAX_RSS_MB")); cap && *cap > 0) p["max_rss_cap_mb"] = *cap;
    return p;
  };
  return w;
}

int run_console::finish(const training::session_outcome& done, const training::session_options& o) {
  if (board_) board_->finish(done.summary);
  std::cout << report::human_summary(done.summary, o.out);
  const auto& check = done.check;
  const auto& differing = done.layers_differing;
  if (!o.verify_against.empty() && !differing.empty()) {
    std::cerr << "dynapar: verify FAILED: " << differing.size() << " of " << done.layers << " layers differ from the run in '"
              << o.verify_against << "' (the first: layer " << differing.front() << ")\n";
    return exit_mismatch;
  }
  if (!o.verify_against.empty())
    std::cerr << "dynapar: verify ok: all " << done.layers << " layers bit for bit those of the run in '" << o.verify_against
              << "' (parameters, buffers, optimizer state)\n";
  if (o.verify && !check.replicas_differing.empty()) {
    std::cerr << "dynapar: verify FAILED: " << check.replicas_differing.size() << " of " << check.replicas_checked
              << " replicas differ from one plain device (the first: " << check.replicas_differing.front() << ")\n";
    return exit_mismatch;
  }
  if (o.verify && !check.verified()) {
    std::cerr << "dynapar: verify FAILED: the run differs from one plain device by " << check.max_rel_diff
              << " (max relative), over the job's tolerance " << check.tolerance << "\n";
    return exit_mismatch;
  }
  if (o.verify && check.max_rel_diff == 0)
    std::cerr << "dynapar: verify ok: the same as one plain device (max relative difference 0; " << check.replicas_checked
              << " replicas' whole states hashed)\n";
  else if (o.verify)  // an exact job with a tolerance, or an inexact one: not the same bits
    std::cerr << "dynapar: verified within tolerance: max relative difference from one plain device " << check.max_rel_diff
              << " <= " << check.tolerance << "\n";
  if (!done.unwritten.empty())
    return report(make_error("io", std::to_string(done.unwritten.size()) + " checkpoint(s) could not be written, the first " +
                                       done.unwritten.front()));
  return exit_ok;
}

}  // namespace dynapar::cli
