// `dynapar chaos JOB --runs N --seed S [--local K]`: a campaign of seeded fault experiments
// (sim/chaos.hpp), each the job run with --verify in one process (`train`) or over K node
// processes (`launch --local K --respawn-s 1`), maybe killed and resumed from its checkpoint.
// One row per run and a verdict; a failing seed replays with --runs 1 --seed SEED.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "cli_util.hpp"
#include "launch/processes.hpp"
#include "commands.hpp"
#include "config/job_file.hpp"
#include "sim/chaos.hpp"

namespace dynapar::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct chaos_options {
  std::string job;
  int runs = 10;
  std::uint64_t seed = 1;
  int local = 0;               // node processes (0: one process)
  std::string out = "out/chaos";
  std::int64_t steps = 0;      // 0: the job's length
  double run_timeout_s = 900;  // a run still going after this is killed and fails
  bool restarts = true;
};

// The job with the experiment's faults and leave/join events (existing events are kept).
result<std::string> write_job(const std::string& from, const sim::chaos_experiment& x, const fs::path& to) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(from);
  } catch (const YAML::Exception& e) {
    return make_error("bad_job", from + ": " + e.what());
  }
  YAML::Node faults;
  faults["seed"] = x.seed;
  for (const auto& f : x.faults) {
    YAML::Node e;
    e["step"] = f.step;
    e["kind"] = sim::name(f.kind);
    if (f.moment != sim::fault_moment::step) e["moment"] = sim::name(f.moment);
    if (f.kind == sim::fault_kind::slow) {
      e["factor"] = f.factor;
      e["steps"] = f.steps;
    }
    if (f.kind == sim::fault_kind::pause || f.kind == sim::fault_kind::partition) e["seconds"] = f.seconds;
    faults["at"].push_back(e);
  }
  doc["faults"] = faults;
  for (const auto& ev : x.events) {
    YAML::Node e;
    e["slot"] = ev.slot;
    e["kind"] = ev.kind == sim::event_kind::join ? "join" : "leave";
    e["device"] = ev.device;
    doc["dynamics"]["events"].push_back(e);
  }
  std::ofstream f(to);
  if (!(f << doc << "\n")) return make_error("io", "cannot write '" + to.string() + "'");
  return to.string();
}

// The newest checkpoint's step in `dir` (-1: none yet).
std::int64_t latest_step(const fs::path& dir) {
  std::ifstream f(dir / "latest");
  std::string name;
  if (!(f >> name) || name.rfind("step-", 0) != 0) return -1;
  try {
    return std::stoll(name.substr(5));
  } catch (...) {
    return -1;
  }
}

struct row {
  std::uint64_t seed = 0;
  std::string faults, verdict = "ok";
  int exit_code = 0, injected = 0, lost_devices = 0, recoveries = 0;
  std::int64_t samples_lost = -1, duplicated = -1;
  double diff = -1, max_recovery_s = 0, wall_s = 0;
  bool restarted = false;
};

row run_one(const chaos_options& o, const config::job& j, std::int64_t steps, std::uint64_t seed, const fs::path& dir) {
  row r;
  r.seed = seed;
  sim::chaos_config cc;
  cc.steps = steps;
  cc.slot_steps = std::max(1, j.replan_every);
  for (const auto& d : j.cluster.cluster.devices) cc.devices.push_back(d.id);
  cc.restarts = o.restarts;
  const auto x = sim::draw_chaos(cc, seed);
  r.faults = x.describe();
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto job = write_job(o.job, x, dir / "job.yaml");
  if (!job) {
    r.verdict = job.err().message;
    return r;
  }
  const int every = static_cast<int>(std::max<std::int64_t>(4, steps / 10));
  std::vector<std::string> args = {"dynapar"};
  if (o.local > 0) args.insert(args.end(), {"launch", "--local", std::to_string(o.local), "--respawn-s", "1"});
  else args.push_back("train");
  args.insert(args.end(), {*job, "--verify", "--out", (dir / "out").string(), "--checkpoint-every", std::to_string(every)});
  if (o.steps > 0) args.insert(args.end(), {"--steps", std::to_string(o.steps)});
  const std::string log = (dir / "log.txt").string();
  stopwatch sw;
  auto first = args;
  first.insert(first.end(), {"--checkpoint-dir", (dir / "ck").string()});
  const pid_t pid = launch::spawn_self(first, log, true);
  std::function<bool()> stop;
  if (x.restart_after >= 0) stop = [&] { return latest_step(dir / "ck") >= x.restart_after; };
  r.exit_code = wait_run(pid, o.run_timeout_s, stop);
  if (r.exit_code == -1 && x.restart_after >= 0 && sw.seconds() < o.run_timeout_s) {
    // Killed (SIGKILL, with its nodes) after a checkpoint: resume from it.
    r.restarted = true;
    auto again = args;
    again.insert(again.end(), {"--resume", (dir / "ck").string()});
    r.exit_code = wait_run(launch::spawn_self(again, log, true), o.run_timeout_s - sw.seconds(), nullptr);
  }
  r.wall_s = sw.seconds();
  std::ifstream f(dir / "out" / "summary.json");
  json s;
  try {
    f >> s;
    r.injected = s.value("faults_injected", 0);
    r.lost_devices = s.value("devices_lost", 0);
    r.recoveries = s.value("recoveries", 0);
    r.samples_lost = s.value("samples_lost", -1);
    r.duplicated = s.value("samples_duplicated", -1);
    const auto diff = s.find("reference_max_rel_diff");  // "inf" or "nan": without bound
    r.diff = diff == s.end() ? -1.0 : diff->is_number() ? diff->get<double>() : std::numeric_limits<double>::infinity();
    r.max_recovery_s = s.value("max_recovery_s", 0.0);
  } catch (const std::exception&) {
    r.verdict = r.exit_code == -1 ? "timed out" : "no summary (exit " + std::to_string(r.exit_code) + ", see " + log + ")";
    return r;
  }
  if (r.exit_code == exit_mismatch || !(r.diff >= 0 && r.diff <= j.verify_tolerance)) r.verdict = "NOT EXACT";
  else if (r.samples_lost != 0 || r.duplicated != 0) r.verdict = "samples lost or duplicated";
  else if (r.exit_code != 0) r.verdict = "exit " + std::to_string(r.exit_code) + " (see " + log + ")";
  return r;
}

int chaos_main(const chaos_options& o) {
  auto j = config::load_job_file(o.job);
  if (!j) return report(j.err());
  if (j->cluster.described)
    return report(make_error("bad_job", o.job + ": chaos draws its faults among the job's devices, and this job lists none (give 'devices')"));
  if (j->replan_every < 1) return report(make_error("bad_job", o.job + ": chaos needs a controller to re-plan around faults: set replan_every"));
  std::int64_t steps = o.steps > 0 ? o.steps : j->steps;
  if (steps == 0 && j->data.kind != "synthetic" && j->data.kind != "fashion_mnist")
    return report(make_error("bad_job", o.job + ": chaos on data of kind " + j->data.kind + " needs steps, not epochs"));
  if (steps == 0) {
    const double samples = j->data.kind == "synthetic" ? j->data.synthetic_samples : 60000;  // Fashion-MNIST's training set
    steps = static_cast<std::int64_t>(j->epochs * std::floor(samples / j->cluster.planner.batch));
  }
  if (steps < 6) return report(make_error("bad_usage", "chaos needs a run of at least 6 steps"));
  std::cout << "chaos: " << o.runs << " run(s) of " << o.job << " (" << steps << " steps) "
            << (o.local > 0 ? "over " + std::to_string(o.local) + " node processes" : std::string("in one process")) << ", seeds "
            << o.seed << ".." << o.seed + o.runs - 1 << "\n";
  std::cout << std::left << std::setw(8) << "seed" << std::setw(62) << "faults" << std::right << std::setw(6) << "inj" << std::setw(6)
            << "lost" << std::setw(6) << "dup" << std::setw(11) << "diff" << std::setw(6) << "rec" << std::setw(9) << "max rec"
            << std::setw(8) << "wall" << "  verdict\n";
  json rows = json::array();
  int failed = 0;
  for (int k = 0; k < o.runs; ++k) {
    const std::uint64_t seed = o.seed + static_cast<std::uint64_t>(k);
    const row r = run_one(o, *j, steps, seed, fs::path(o.out) / ("seed-" + std::to_string(seed)));
    failed += r.verdict != "ok";
    std::ostringstream diff;
    diff << std::setprecision(3) << r.diff;
    std::cout << std::left << std::setw(8) << r.seed << std::setw(62) << r.faults.substr(0, 61) << std::right << std::setw(6) << r.injected
              << std::setw(6) << r.samples_lost << std::setw(6) << r.duplicated << std::setw(11) << diff.str() << std::setw(6)
              << r.recoveries << std::setw(8) << std::fixed << std::setprecision(2) << r.max_recovery_s << "s" << std::setw(7)
              << std::setprecision(0) << r.wall_s << "s" << std::defaultfloat << "  " << r.verdict << "\n"
              << std::flush;
    rows.push_back({{"seed", r.seed},           {"faults", r.faults},         {"restarted", r.restarted},
                    {"faults_injected", r.injected}, {"devices_lost", r.lost_devices}, {"recoveries", r.recoveries},
                    {"samples_lost", r.samples_lost}, {"samples_duplicated", r.duplicated}, {"reference_max_rel_diff", r.diff},
                    {"max_recovery_s", r.max_recovery_s}, {"exit_code", r.exit_code}, {"wall_s", r.wall_s}, {"verdict", r.verdict}});
  }
  std::ofstream(fs::path(o.out) / "chaos.json") << json{{"job", o.job}, {"steps", steps}, {"local", o.local}, {"runs", rows}}.dump(2)
                                                << "\n";
  if (failed == 0) {
    std::cout << "chaos: all " << o.runs << " runs ";
    if (j->verify_tolerance > 0) std::cout << "within verify_tolerance " << j->verify_tolerance;  // not bit for bit
    else std::cout << "exact (verify_tolerance 0)";
    std::cout << ", no sample lost or applied twice\n";
    return exit_ok;
  }
  std::cout << "chaos: " << failed << " of " << o.runs << " runs FAILED; replay one with: dynapar chaos " << o.job
            << " --runs 1 --seed SEED" << (o.local > 0 ? " --local " + std::to_string(o.local) : "") << "\n";
  return exit_mismatch;
}

}  // namespace

void add_chaos(CLI::App& app, runner& run) {
  auto o = std::make_shared<chaos_options>();
  auto* sub = app.add_subcommand("chaos", "Run seeded fault experiments on a job, each verified against one plain device");
  sub->add_option("job", o->job, "Job YAML with replan_every (docs/FORMATS.md)")->required();
  sub->add_option("--runs", o->runs, "Experiments (default 10)")->check(CLI::Range(1, 100000));
  sub->add_option("--seed", o->seed, "Seed of the first experiment; run k uses seed + k (default 1)");
  sub->add_option("--local", o->local, "Node processes (default 0: one process)")->check(CLI::Range(0, 64));
  sub->add_option("--out", o->out, "Directory for each run's job, log and outputs, and chaos.json (default out/chaos)");
  sub->add_option("--steps", o->steps, "Override the job's length")->check(CLI::Range(6, 100000000));
  sub->add_option("--run-timeout-s", o->run_timeout_s, "A run still going after this many seconds fails (default 900)")
      ->check(CLI::Range(10.0, 86400.0));
  sub->add_flag("!--no-restarts", o->restarts, "Never kill and resume the controller");
  sub->callback([o, &run] { run = [o] { return chaos_main(*o); }; });
}

}  // namespace dynapar::cli
