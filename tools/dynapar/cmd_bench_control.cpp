// `dynapar bench control`: how the controller's work grows with the number of node processes
// (issue 51). For each N it runs `dynapar launch --local N` on a job of N one-device nodes
// training the one-layer `linear` model (data parallelism, 8 samples a device, nothing
// emulated), so that each step is little more than the control plane's messages. From the
// run's metrics.jsonl and summary.json: steps/s, the controller process's CPU per step in
// steady state (process_cpu_s, after the first fifth of the steps), its peak memory. Then a
// least-squares line through the points extrapolates both to 1,024 and 10,000 nodes.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "launch/processes.hpp"
#include "planner/policy.hpp"

namespace dynapar::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct control_bench_options {
  std::vector<int> nodes = {4, 16, 64};
  int steps = 60;
  std::string policy = "dp_even";
  std::string out = "out/bench_control";
  double timeout_s = 900;
  bool json = false;
};

constexpr int samples_per_device = 8;

std::string job_text(int n, const control_bench_options& o) {
  std::ostringstream y;
  y << "# Written by `dynapar bench control`: " << n << " one-device nodes, the one-layer model.\n"
    << "name: control_" << n << "\nmodel: linear\ndata: synthetic\nsynthetic_samples: " << std::max(6000, 4 * n * samples_per_device)
    << "\nbatch: " << n * samples_per_device << "\nmicro_batch: " << samples_per_device << "\nsteps: " << o.steps
    << "\noptimizer: {kind: sgd, lr: 0.01}\npolicy: " << o.policy << "\nhash_every: 0\nemulate: false\n"
    << "devices:\n  - {id: 0, count: " << n << ", speed: 1, memory_gb: 1}\n";
  return y.str();
}

struct point {
  int nodes = 0;
  int steps = 0;                 // steady-state steps measured
  double step_s = 0;             // mean wall time of a step (the driver's)
  double cpu_per_step_s = 0;     // the controller process's CPU per step
  double max_rss_mb = 0;
  double controller_tensor_bytes_per_step = 0;
};

result<point> measure(int n, const control_bench_options& o) {
  const fs::path dir = fs::path(o.out) / ("nodes-" + std::to_string(n));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "job.yaml") << job_text(n, o);
  const std::string log = (dir / "log.txt").string();
  const pid_t pid = launch::spawn_self({"dynapar", "launch", "--local", std::to_string(n), (dir / "job.yaml").string(), "--out",
                                        (dir / "run").string()},
                                       log, true);
  if (pid < 0) return make_error("failed", "could not start `dynapar launch`");
  const int rc = wait_run(pid, o.timeout_s, nullptr);
  if (rc != 0)
    return make_error("failed", std::to_string(n) + " nodes: the run " + (rc < 0 ? "timed out" : "exited " + std::to_string(rc)) +
                                    " (see " + log + ")");
  std::map<std::int64_t, json> rows;  // by step: a retried step's last attempt
  std::ifstream metrics(dir / "run" / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto r = json::parse(line, nullptr, false);
    if (r.is_object() && !r.contains("event") && r.contains("process_cpu_s")) rows[r.at("step").get<std::int64_t>()] = r;
  }
  json summary;
  try {
    std::ifstream(dir / "run" / "summary.json") >> summary;
  } catch (const std::exception&) {
    return make_error("failed", std::to_string(n) + " nodes: no summary.json (see " + log + ")");
  }
  const int skip = std::max<int>(2, static_cast<int>(rows.size()) / 5);  // start-up: spawning, profiles, first deployment
  if (static_cast<int>(rows.size()) < skip + 2) return make_error("failed", std::to_string(n) + " nodes: too few steps to measure");
  point p;
  p.nodes = n;
  double first_cpu = 0, last_cpu = 0, time = 0;
  int i = 0;
  for (const auto& [step, r] : rows) {
    if (i++ < skip) continue;
    if (p.steps == 0) first_cpu = r.at("process_cpu_s").get<double>();
    else time += r.at("time_s").get<double>();  // the steps after the first kept one, as the CPU
    last_cpu = r.at("process_cpu_s").get<double>();
    ++p.steps;
  }
  p.steps -= 1;  // intervals between the kept rows
  p.step_s = time / p.steps;
  p.cpu_per_step_s = (last_cpu - first_cpu) / p.steps;
  p.max_rss_mb = summary.at("process").at("max_rss_mb").get<double>();
  p.controller_tensor_bytes_per_step = summary.value("controller_tensor_bytes_per_step", 0.0);
  return p;
}

struct line_fit {
  double a = 0, b = 0;  // y = a + b x
  double at(double x) const { return a + b * x; }
};

line_fit least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
  const double den = n * sxx - sx * sx;
  line_fit f;
  f.b = den != 0 ? (n * sxy - sx * sy) / den : 0;
  f.a = (sy - f.b * sx) / n;
  return f;
}

int bench_control(const control_bench_options& o) {
  std::vector<point> points;
  for (int n : o.nodes) {
    if (!o.json) std::cerr << "bench control: " << n << " nodes, " << o.steps << " steps...\n";
    auto p = measure(n, o);
    if (!p) return report(p.err());
    points.push_back(*p);
  }
  json out = {{"policy", o.policy}, {"steps", o.steps}, {"model", "linear"}, {"samples_per_device", samples_per_device}, {"points", json::array()}};
  std::vector<double> x, cpu, rss;
  for (const auto& p : points) {
    out["points"].push_back({{"nodes", p.nodes},
                             {"steps_measured", p.steps},
                             {"step_s", p.step_s},
                             {"steps_per_s", 1 / p.step_s},
                             {"controller_cpu_per_step_s", p.cpu_per_step_s},
                             {"controller_max_rss_mb", p.max_rss_mb},
                             {"controller_tensor_bytes_per_step", p.controller_tensor_bytes_per_step}});
    x.push_back(p.nodes), cpu.push_back(p.cpu_per_step_s), rss.push_back(p.max_rss_mb);
  }
  const bool can_fit = std::set<double>(x.begin(), x.end()).size() >= 2;
  if (can_fit) {
    const auto fc = least_squares(x, cpu);
    auto fm = least_squares(x, rss);
    // Memory that does not grow over the points measured (LibTorch's own dominates) is not
    // extrapolated downwards: the largest measured stands.
    if (fm.b < 0) fm = {*std::max_element(rss.begin(), rss.end()), 0};
    json at = json::array();
    for (int n : {1024, 10000})
      at.push_back({{"nodes", n}, {"controller_cpu_per_step_s", fc.at(n)}, {"max_steps_per_s", 1 / fc.at(n)}, {"controller_max_rss_mb", fm.at(n)}});
    out["fit"] = {{"cpu_per_step_s", {{"fixed", fc.a}, {"per_node", fc.b}}}, {"max_rss_mb", {{"fixed", fm.a}, {"per_node", fm.b}}}, {"extrapolated", at}};
  }
  std::ofstream(fs::path(o.out) / "control.json") << out.dump(2) << "\n";
  if (o.json) {
    std::cout << out.dump() << "\n";
    return exit_ok;
  }
  std::cout << std::fixed << std::setprecision(2) << "nodes  steps/s  controller CPU/step (ms)  controller memory (MB)  tensor bytes/step\n";
  for (const auto& p : points)
    std::cout << std::setw(5) << p.nodes << std::setw(9) << 1 / p.step_s << std::setw(26) << 1e3 * p.cpu_per_step_s << std::setw(24)
              << p.max_rss_mb << std::setw(19) << std::setprecision(0) << p.controller_tensor_bytes_per_step << std::setprecision(2) << "\n";
  if (!can_fit) {
    std::cout << "(two node counts or more are needed for the extrapolation)\n";
    return exit_ok;
  }
  const auto& f = out["fit"];
  std::cout << "fit: CPU/step = " << 1e3 * f["cpu_per_step_s"]["fixed"].get<double>() << " ms + "
            << 1e6 * f["cpu_per_step_s"]["per_node"].get<double>() << " us x nodes; memory = " << f["max_rss_mb"]["fixed"].get<double>()
            << " MB + " << f["max_rss_mb"]["per_node"].get<double>() << " MB x nodes\n";
  for (const auto& e : f["extrapolated"])
    std::cout << "at " << e["nodes"].get<int>() << " nodes: " << 1e3 * e["controller_cpu_per_step_s"].get<double>()
              << " ms of controller CPU a step (at most " << e["max_steps_per_s"].get<double>() << " steps/s on one core), "
              << e["controller_max_rss_mb"].get<double>() << " MB\n";
  std::cout << "figures: " << (fs::path(o.out) / "control.json").string() << "\n";
  return exit_ok;
}

}  // namespace

void add_bench_control(CLI::App& bench, runner& run) {
  auto o = std::make_shared<control_bench_options>();
  auto* sub = bench.add_subcommand("control", "The controller's CPU, memory and steps/s over N one-device node processes, extrapolated");
  sub->add_option("--nodes", o->nodes, "Node counts, comma-separated (default 4,16,64)")->delimiter(',')->check(CLI::Range(1, 1024));
  sub->add_option("--steps", o->steps, "Steps per run (default 60; the first fifth is start-up, not measured)")->check(CLI::Range(12, 100000));
  sub->add_option("--policy", o->policy, "The controller's policy (default dp_even: one plan, no re-plans)")
      ->check(CLI::IsMember(planner::policy_names()));
  sub->add_option("--out", o->out, "Directory for each run and control.json (default out/bench_control)");
  sub->add_option("--timeout-s", o->timeout_s, "Seconds each run may take (default 900)")->check(CLI::Range(1.0, 86400.0));
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([o, &run] { run = [o] { return bench_control(*o); }; });
}

}  // namespace dynapar::cli
