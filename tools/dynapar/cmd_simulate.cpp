// `dynapar simulate`: policies side by side on a scenario, per-slot CSV, plots, V sweep.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "config/scenario_file.hpp"
#include "planner/policy.hpp"
#include "sim/runner.hpp"

namespace dynapar::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct simulate_options {
  std::string file, out, policies;
  bool json = false;
  std::vector<double> sweep_v;
  int threads = 0;
};

// A progress bar on stderr when it is a terminal; silent otherwise.
class progress {
 public:
  explicit progress(long total) : total_(total), tty_(isatty(STDERR_FILENO)) {}
  void tick() {
    const long done = ++done_;
    if (!tty_ || (done % 16 && done != total_)) return;
    std::lock_guard<std::mutex> lock(mu_);
    const int width = 40, filled = static_cast<int>(width * done / std::max(1L, total_));
    std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done << "/" << total_
              << " slots" << std::flush;
    if (done == total_) std::cerr << "\n";
  }

 private:
  long total_;
  std::atomic<long> done_{0};
  bool tty_;
  std::mutex mu_;
};

// Runs each job on its own thread pool slot; results keep the jobs' order.
std::vector<result<sim::run_result>> run_all(const std::vector<std::pair<sim::scenario, std::string>>& jobs, int threads) {
  long total = 0;
  for (const auto& [s, p] : jobs) total += s.slots;
  progress bar(total);
  std::vector<std::optional<result<sim::run_result>>> out(jobs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < jobs.size();) out[i] = sim::run_policy(jobs[i].first, jobs[i].second, [&](int) { bar.tick(); });
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  std::vector<result<sim::run_result>> res;
  for (auto& o : out) res.push_back(std::move(*o));
  return res;
}

json summary_json(const sim::summary& s) {
  return {{"mean_batch_time_s", s.mean_batch_time_s}, {"p95_batch_time_s", s.p95_batch_time_s},
          {"throughput_samples_per_s", s.throughput}, {"avg_cost", s.avg_cost},
          {"budget", s.budget < 0 ? json(nullptr) : json(s.budget)}, {"meets_budget", s.meets_budget},
          {"avg_energy_j", s.avg_energy_j}, {"efficiency", s.efficiency}, {"mean_floor_s", s.mean_floor_s},
          {"prediction_error", s.prediction_error}, {"replans", s.replans}, {"failures", s.failures},
          {"bytes_migrated", s.bytes_migrated}, {"final_queue", s.final_queue}, {"slots", s.slots},
          {"ok_slots", s.ok_slots}, {"error", s.error}};
}

void write_csv(const fs::path& file, const std::vector<sim::run_result>& runs) {
  std::ofstream o(file);
  o << "policy,slot,ok,batch_time_s,predicted_s,floor_s,cost,energy_j,cost_queue,bytes_migrated,replanned,failed,devices_used,groups\n";
  for (const auto& r : runs)
    for (const auto& s : r.slots)
      o << r.sum.policy << "," << s.slot << "," << s.ok << "," << s.batch_time_s << "," << s.predicted_s << "," << s.floor_s
        << "," << s.cost << "," << s.energy_j << "," << s.cost_queue << "," << s.bytes_migrated << "," << s.replanned << ","
        << s.failed << "," << s.devices_used << "," << s.groups << "\n";
}

// PNG plots through gnuplot, when it is installed (tools/bootstrap.sh installs gnuplot-nox).
void plot(const fs::path& dir, const std::vector<sim::run_result>& runs, double budget, bool sweep) {
  for (const auto& r : runs) {
    std::ofstream d(dir / ("series_" + r.sum.policy + ".dat"));
    double sum_cost = 0;
    int n = 0;
    for (const auto& s : r.slots) {
      if (!s.ok) continue;
      sum_cost += s.cost;
      ++n;
      d << s.slot << " " << s.batch_time_s << " " << sum_cost / n << " " << s.cost_queue << "\n";
    }
  }
  std::ofstream g(dir / "plots.gp");
  g << "set terminal pngcairo size 1000,600 noenhanced\nset key outside right\nset grid\n";
  auto lines = [&](int col) {
    std::string s;
    for (const auto& r : runs)
      s += (s.empty() ? "" : ", ") + std::string("'series_") + r.sum.policy + ".dat' using 1:" + std::to_string(col) +
           " with lines title '" + r.sum.policy + "'";
    return s;
  };
  g << "set output 'batch_time.png'\nset xlabel 'slot'\nset ylabel 'batch time (s)'\nset logscale y\nplot " << lines(2) << "\n";
  g << "unset logscale y\nset output 'cost.png'\nset ylabel 'running average cost per slot'\nplot " << lines(3);
  if (budget > 0) g << ", " << budget << " with lines dt 2 lw 2 title 'budget'";
  g << "\nset output 'queue.png'\nset ylabel 'cost queue backlog Q'\nplot " << lines(4) << "\n";
  if (sweep)
    g << "set output 'v_sweep.png'\nset logscale x\nset xlabel 'V'\nset ylabel 'mean batch time (s)'\nset y2label 'mean backlog Q'\n"
         "set ytics nomirror\nset y2tics\nplot 'sweep.dat' using 1:2 with linespoints title 'batch time', "
         "'sweep.dat' using 1:4 axes x1y2 with linespoints title 'mean backlog'\n";
  g.close();
  const int rc = cli::run_gnuplot(dir.string(), "plots.gp");
  if (rc == 127) std::cerr << "dynapar: gnuplot not found: no plots (the CSV files are written)\n";
  else if (rc != 0) std::cerr << "dynapar: gnuplot failed; see " << (dir / "plots.gp") << "\n";
}

// The runs as a table on stdout, each policy against dp_even, and the V sweep's lines.
void print_table(const sim::scenario& sc, const std::vector<sim::run_result>& runs, const json& sweep, double elapsed) {
  const auto* dp_even = [&]() -> const sim::summary* {
    for (const auto& r : runs)
      if (r.sum.policy == "dp_even") return &r.sum;
    return nullptr;
  }();
  std::cout << "scenario " << sc.name << ": " << sc.cluster.devices.size() << " devices, " << sc.slots << " slots, batch "
            << sc.cfg.batch << ", model " << sc.model.name << " (" << std::setprecision(3) << elapsed << " s)\n";
  std::cout << std::left << std::setw(18) << "policy" << std::right << std::setw(11) << "mean T(s)" << std::setw(11) << "p95 T(s)"
            << std::setw(12) << "samples/s" << std::setw(11) << "avg cost" << std::setw(8) << "budget" << std::setw(11)
            << "energy(J)" << std::setw(8) << "eff" << std::setw(9) << "vs dp_ev" << std::setw(8) << "replans" << std::setw(11)
            << "migr(MB)" << "\n";
  for (const auto& r : runs) {
    const auto& s = r.sum;
    std::cout << std::left << std::setw(18) << s.policy << std::right << std::setprecision(4);
    if (s.ok_slots == 0) {
      std::cout << "  infeasible: " << s.error << "\n";
      continue;
    }
    std::cout << std::setw(11) << s.mean_batch_time_s << std::setw(11) << s.p95_batch_time_s << std::setw(12)
              << sc.cfg.batch / s.mean_batch_time_s << std::setw(11) << s.avg_cost << std::setw(8)
              << (s.budget < 0 ? "-" : s.meets_budget ? "met" : "MISSED") << std::setw(11) << s.avg_energy_j << std::setw(7)
              << std::setprecision(1) << std::fixed << 100 * s.efficiency << "%" << std::setw(8)
              << (dp_even && dp_even->ok_slots ? 100 * (1 - s.mean_batch_time_s / dp_even->mean_batch_time_s) : 0.0) << "%"
              << std::setw(8) << s.replans << std::setw(11) << s.bytes_migrated / 1e6 << std::defaultfloat << "\n";
    if (s.ok_slots < s.slots) std::cout << "    (" << s.slots - s.ok_slots << " slots without a plan: " << s.error << ")\n";
  }
  for (const auto& s : sweep)
    std::cout << "V " << s["v"] << ": mean T " << s["mean_batch_time_s"] << " s, avg cost " << s["avg_cost"] << ", mean Q "
              << s["mean_queue"] << "\n";
}

int simulate_main(const simulate_options& o) {
  auto sc = config::load_scenario_file(o.file);
  if (!sc) return report(sc.err());
  std::vector<std::string> names;
  if (o.policies == "all" || (o.policies.empty() && sc->policies.empty())) {
    for (const auto& n : planner::policy_names())
      if (n != "oracle" || static_cast<int>(sc->cluster.devices.size()) <= planner::oracle_max_devices) names.push_back(n);
  } else if (!o.policies.empty()) {
    std::stringstream ss(o.policies);
    for (std::string n; std::getline(ss, n, ',');) {
      if (auto p = planner::make_policy(n); !p) return report(p.err());
      names.push_back(n);
    }
  } else {
    names = sc->policies;
  }
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::pair<sim::scenario, std::string>> jobs;
  for (const auto& n : names) jobs.emplace_back(*sc, n);
  for (double v : o.sweep_v) {
    auto s = *sc;
    s.cfg.v = v;
    jobs.emplace_back(std::move(s), "joint_lyapunov");
  }
  stopwatch sw;
  auto results = run_all(jobs, threads);
  const double elapsed = sw.seconds();
  std::vector<sim::run_result> runs;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!results[i]) return report(results[i].err());
    runs.push_back(std::move(*results[i]));
  }
  const double budget = sc->budget.has_cost() ? sc->budget.cost_per_slot : -1;
  json sweep = json::array();
  for (std::size_t k = 0; k < o.sweep_v.size(); ++k) {
    const auto& r = results[names.size() + k];
    if (!r) return report(r.err());
    double mean_q = 0;
    for (const auto& s : r->slots) mean_q += s.cost_queue / static_cast<double>(r->slots.size());
    sweep.push_back({{"v", o.sweep_v[k]}, {"mean_batch_time_s", r->sum.mean_batch_time_s}, {"avg_cost", r->sum.avg_cost},
                     {"mean_queue", mean_q}, {"final_queue", r->sum.final_queue}, {"meets_budget", r->sum.meets_budget}});
  }
  json out = {{"scenario", sc->name}, {"slots", sc->slots}, {"devices", sc->cluster.devices.size()},
              {"elapsed_s", elapsed}, {"policies", json::object()}};
  for (const auto& r : runs) out["policies"][r.sum.policy] = summary_json(r.sum);
  if (!o.sweep_v.empty()) out["v_sweep"] = sweep;
  if (!o.out.empty()) {
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (ec) return report(make_error("io", "cannot create '" + o.out + "': " + ec.message()));
    write_csv(fs::path(o.out) / "slots.csv", runs);
    std::ofstream(fs::path(o.out) / "summary.json") << out.dump(2) << "\n";
    if (!o.sweep_v.empty()) {
      std::ofstream d(fs::path(o.out) / "sweep.dat");
      for (const auto& s : sweep) d << s["v"] << " " << s["mean_batch_time_s"] << " " << s["avg_cost"] << " " << s["mean_queue"] << "\n";
    }
    plot(o.out, runs, budget, !o.sweep_v.empty());
  }
  if (o.json) {
    std::cout << out.dump() << "\n";
    return exit_ok;
  }
  print_table(*sc, runs, sweep, elapsed);
  return exit_ok;
}

}  // namespace

void add_simulate(CLI::App& app, runner& run) {
  auto o = std::make_shared<simulate_options>();
  auto* sub = app.add_subcommand("simulate", "Compare policies on a scenario of a dynamic heterogeneous cluster");
  sub->add_option("file", o->file, "Scenario YAML (docs/FORMATS.md)")->required();
  sub->add_option("--policies", o->policies, "Comma-separated policy names, or 'all' (default: the scenario's list)");
  sub->add_option("--out", o->out, "Directory for slots.csv, summary.json and PNG plots");
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_option("--sweep-v", o->sweep_v, "Also run joint_lyapunov at each V (comma-separated)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  sub->add_option("--threads", o->threads, "Policies run in parallel (default: cores)")->check(CLI::Range(1, 256));
  sub->callback([o, &run] { run = [o] { return simulate_main(*o); }; });
}

}  // namespace dynapar::cli
