// `dynapar bench runtime JOB`: the policies side by side through the same actor runtime on the
// job's emulated cluster and dynamics (each re-planned by the controller every slot): step
// time, cost against the budget, the simulator's prediction for the very plans that ran
// (fidelity), and efficiency against the communication-free floor. With `--local N` the
// devices run in N node processes, as `launch --local N` runs them.
#include <stdlib.h>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "actors/trainer.hpp"
#include "comm/keys.hpp"
#include "remote_train.hpp"
#include "training/prepare.hpp"
#include "planner/policy.hpp"
#include "sim/des.hpp"
#include "sim/world.hpp"

namespace dynapar::cli {
namespace {
using nlohmann::json;

struct runtime_bench_options {
  std::string job = "examples/jobs/fashion_mnist_hetero.yaml";
  std::vector<std::string> policies{"joint_lyapunov", "dp_even", "dp_balanced", "pipeline_even", "hetpipe_static"};
  std::int64_t steps = 200;
  int replan_every = 5;
  int rounds = 2;  // every policy once per round, so that the machine's drift hits them all
  bool no_budget = false;
  std::string emulate_compute;  // empty: the job's
  bool json = false;
  int local = 0;     // > 0: the devices in this many node processes (launch --local)
  std::string keys;  // with local: the throwaway keys the nodes and the controller use
};

struct policy_run {
  double measured_s = 0, predicted_s = 0, floor_s = 0, cost = 0;
  double modeled_s = 0;  // the parts of a step the time model covers: pipelines, sums, updates, migration
  int steps = 0, replans = 0;
  double accuracy = 0;
};

// As `launch --local N` trains: a controller on loopback and N node processes.
result<training::train_outcome> over_nodes(const training::prepared_job& p, const training::train_settings& s,
                                           const training::train_callbacks& cb, const runtime_bench_options& o) {
  training::prepared_job q = p;
  q.settings = s;
  controller_options c;
  c.bind = "tcp://127.0.0.1:0";
  c.local_nodes = o.local;
  c.keys = o.keys;  // the nodes' throwaway keys (bench_runtime wrote them)
  auto k = comm::load_server_keys(comm::local_controller_keys(o.keys));
  if (!k) return k.err();
  c.server = *k;
  return train_remote(q, cb, c);
}

result<policy_run> run_policy(const training::prepared_job& p, const std::string& policy, const runtime_bench_options& o) {
  training::train_settings s = p.settings;
  if (!s.controller) return make_error("bad_job", "bench runtime needs a job with a controller (replan_every > 0)");
  s.controller->policy = policy;
  if (o.no_budget) s.controller->core.budget = {};
  s.controller->replan_every = o.replan_every;
  s.slot_steps = o.replan_every;
  s.steps = o.steps;
  s.hash_every = 0;
  if (!o.emulate_compute.empty()) s.profile_timed = o.emulate_compute == "profile";
  // CPU-timed devices: profiled again right before each run (unless the job pins a profile),
  // since the machine's speed drifts over minutes by ~10 %, which would otherwise be charged
  // to the simulator. Profile-timed devices run at the job's profile in every run: the same
  // emulated hardware for all.
  if (!s.profile_timed && p.job.profile.empty()) {
    const int micro = s.controller->core.planner.micro_batch > 0 ? s.controller->core.planner.micro_batch : 16;
    auto profile = model::measure_profile(*p.model, micro, 15, s.optimizer);
    if (!profile) return profile.err();
    s.controller->core.profile = *profile;
    s.profile = *profile;
  }
  // The simulator's view of the same run: the true emulated cluster slot by slot (the same
  // seeded world the driver plays) and the plan in force at each step.
  sim::world world(s.emulated);
  const step::layout_options dispatch{(*planner::make_policy(policy))->dispatches(), s.dispatch_probe, s.exact};  // as the driver
  std::map<std::int64_t, planner::plan> plans;
  policy_run r;
  training::train_callbacks cb;
  cb.on_plan = [&](const training::plan_record& pr) { plans[pr.step] = pr.plan; };
  cb.on_step = [&](const training::step_record& rec) {
    if (rec.step == 0) return;  // start-up: spawning, benchmarks, first deployment
    const auto& truth = world.at(static_cast<int>(rec.step / o.replan_every));
    planner::problem prob(*s.profile, truth, s.controller->core.planner, s.controller->core.budget);
    auto it = plans.upper_bound(rec.step);
    const auto& plan = std::prev(it)->second;
    const planner::plan* previous = nullptr;
    if (std::prev(it)->first == rec.step && std::prev(it) != plans.begin()) previous = &std::prev(std::prev(it))->second;
    r.predicted_s += sim::simulate_step(prob, plan, previous, dispatch).time_s;
    r.floor_s += prob.floor_s();
    r.measured_s += rec.time_s;
    r.modeled_s += rec.pipeline_s + rec.sync_s + rec.update_s + rec.migration_s;
    r.cost += rec.cost;
    ++r.steps;
  };
  auto out = o.local > 0 ? over_nodes(p, s, cb, o) : actors::train(*p.model, p.train_set, s, cb);
  if (!out) return out.err();
  r.replans = out->replans;
  r.accuracy = model::accuracy(out->final_layers, p.test_set);
  return r;
}

// Throwaway keys for --local's nodes, removed at the end.
struct temp_keys {
  std::string dir;
  ~temp_keys() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

int bench_runtime(runtime_bench_options o) {
  temp_keys keys;
  if (o.local > 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dynapar-bench-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return report(make_error("io", "cannot make a directory for the nodes' keys in /tmp"));
    keys.dir = pattern;
    o.keys = pattern + "/keys";
    if (auto st = comm::write_local_keys(o.keys, o.local); !st) return report(st.err());
  }
  auto p = training::prepare_job(o.job, o.steps);
  if (!p) return report(p.err());
  if (p->job.cluster.described)
    return report(make_error("bad_job", "job '" + p->job.name + "' lists no devices: bench runtime sets the measured step time against " +
                                            "the simulated one, which needs the devices' speeds in the job"));
  for (const auto& name : o.policies)
    if (auto pol = planner::make_policy(name); !pol) return report(pol.err());
  if (o.no_budget) p->job.cluster.budget = {};
  const double budget = p->job.cluster.budget.cost_per_slot;
  std::vector<policy_run> sum(o.policies.size());
  for (int round = 0; round < o.rounds; ++round)
    for (std::size_t k = 0; k < o.policies.size(); ++k) {
      std::cerr << "bench runtime: round " << round + 1 << "/" << o.rounds << ", " << o.policies[k] << "\n";
      auto r = run_policy(*p, o.policies[k], o);
      if (!r) return report(r.err());
      auto& a = sum[k];
      a.measured_s += r->measured_s;
      a.modeled_s += r->modeled_s;
      a.predicted_s += r->predicted_s;
      a.floor_s += r->floor_s;
      a.cost += r->cost;
      a.steps += r->steps;
      a.replans += r->replans;
      a.accuracy += r->accuracy / o.rounds;
    }
  json rows = json::array();
  double reference_s = 0;
  for (std::size_t k = 0; k < o.policies.size(); ++k) {
    const auto& name = o.policies[k];
    const policy_run* r = &sum[k];
    const double n = std::max(1, r->steps);
    if (rows.empty()) reference_s = r->measured_s / n;
    rows.push_back({{"policy", name},
                    {"step_s", r->measured_s / n},
                    {"ratio_to_first", r->measured_s / n / reference_s},
                    {"predicted_step_s", r->predicted_s / n},
                    {"measured_over_predicted", r->measured_s / r->predicted_s},
                    // Without the driver's own step-end work (gathering and adding the
                    // micro-batch gradients), which the time model does not include.
                    {"modeled_over_predicted", r->modeled_s / r->predicted_s},
                    {"driver_s", (r->measured_s - r->modeled_s) / n},
                    {"efficiency", r->floor_s / r->measured_s},
                    {"avg_cost", r->cost / n},
                    {"budget", p->job.cluster.budget.has_cost() ? json(budget) : json(nullptr)},
                    {"replans", static_cast<double>(r->replans) / o.rounds},
                    {"test_accuracy", r->accuracy}});
  }
  json out = {{"job", p->job.name}, {"node_processes", o.local}, {"steps", o.steps}, {"rounds", o.rounds}, {"replan_every", o.replan_every}, {"emulation_scale", p->scale}, {"runs", rows}};
  if (o.json) {
    std::cout << out.dump() << "\n";
    return exit_ok;
  }
  std::cout << p->job.name << ": " << o.rounds << " rounds of " << o.steps << " steps, a slot every " << o.replan_every
            << " steps, the same runtime and dynamics for every policy"
            << (o.local > 0 ? ", the devices in " + std::to_string(o.local) + " node processes" : std::string()) << "\n"
            << std::left << std::setw(16) << "policy" << std::right << std::setw(10) << "step ms" << std::setw(9) << "ratio"
            << std::setw(10) << "sim ms" << std::setw(10) << "meas/sim" << std::setw(10) << "part/sim" << std::setw(10) << "driver ms"
            << std::setw(8) << "eff" << std::setw(11) << "cost/step"
            << std::setw(8) << "budget" << std::setw(8) << "replans" << "\n";
  for (const auto& r : rows) {
    std::ostringstream cost;
    cost << std::setprecision(4) << r["avg_cost"].get<double>();
    std::cout << std::left << std::setw(16) << r["policy"].get<std::string>() << std::right << std::fixed << std::setprecision(1)
              << std::setw(10) << 1e3 * r["step_s"].get<double>() << std::setprecision(3) << std::setw(9)
              << r["ratio_to_first"].get<double>() << std::setprecision(1) << std::setw(10)
              << 1e3 * r["predicted_step_s"].get<double>() << std::setprecision(3) << std::setw(10)
              << r["measured_over_predicted"].get<double>() << std::setw(10) << r["modeled_over_predicted"].get<double>()
              << std::setprecision(1) << std::setw(10) << 1e3 * r["driver_s"].get<double>() << std::setprecision(2) << std::setw(8)
              << r["efficiency"].get<double>()
              << std::setw(11) << cost.str() << std::setw(8)
              << (r["budget"].is_null() ? "-" : r["avg_cost"].get<double>() <= budget ? "met" : "missed") << std::setw(8)
              << std::setprecision(1) << r["replans"].get<double>() << std::defaultfloat << "\n";
  }
  return exit_ok;
}

}  // namespace

void add_bench_runtime(CLI::App& bench, runner& run) {
  auto o = std::make_shared<runtime_bench_options>();
  auto* sub = bench.add_subcommand("runtime", "Policies side by side through the actor runtime on a job's emulated cluster");
  sub->add_option("job", o->job, "Job YAML with replan_every > 0 (default examples/jobs/fashion_mnist_hetero.yaml)");
  sub->add_option("--policies", o->policies, "Policies (comma-separated), the first is the reference of the ratios")
      ->delimiter(',')
      ->check(CLI::IsMember(planner::policy_names()));
  sub->add_option("--steps", o->steps, "Steps per policy and round")->check(CLI::Range(2, 1000000));
  sub->add_option("--rounds", o->rounds, "Rounds (every policy once per round)")->check(CLI::Range(1, 1000));
  sub->add_option("--replan-every", o->replan_every, "Steps per slot (the job's dynamics play in slots)")->check(CLI::Range(1, 100000));
  sub->add_option("--emulate-compute", o->emulate_compute, "cpu: work lasts its CPU time / speed; profile: the profile's time / speed (default: the job's)")
      ->check(CLI::IsMember({"cpu", "profile"}));
  sub->add_flag("--no-budget", o->no_budget, "Drop the job's cost budget (the fastest plans, whatever they cost)");
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_option("--local", o->local, "Run the devices in N node processes on this machine, as launch --local N (default: in this process)")
      ->check(CLI::Range(1, 256));
  sub->callback([o, &run] { run = [o] { return bench_runtime(*o); }; });
}

}  // namespace dynapar::cli
