// `dynapar plan`: one slot's decision for a cluster file (or a scenario's first slot) and a
// model, with its explanation.
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli_util.hpp"
#include "commands.hpp"
#include "config/cluster_file.hpp"
#include "config/profile_json.hpp"
#include "config/report_json.hpp"
#include "config/scenario_file.hpp"
#include "planner/evaluate.hpp"
#include "planner/policy.hpp"
#include "sim/world.hpp"

namespace dynapar::cli {
namespace {

struct plan_options {
  std::string cluster, scenario, model, policy = "joint_lyapunov";
  bool json = false;
};

void print_report(const std::string& policy, const planner::plan_report& r) {
  std::cout << std::setprecision(4) << "policy " << policy << ": batch time " << r.batch_time_s << " s (floor "
            << r.floor_s << " s, efficiency " << 100 * r.efficiency << " %)\n"
            << "  compute " << r.compute_s << " s, sync " << r.sync_s << " s, updates " << r.update_s << " s, migration " << r.migration_s
            << " s; cost " << r.cost << " per slot; energy " << r.energy_j << " J\n"
            << "  score " << r.score << " = V*T " << r.time_term << " + Q*C " << r.cost_term << " + sum Z*E "
            << r.energy_term << "\n";
  for (std::size_t g = 0; g < r.groups.size(); ++g) {
    const auto& gr = r.groups[g];
    std::cout << "  group " << g << ": devices ";
    for (std::size_t j = 0; j < gr.devices.size(); ++j) std::cout << (j ? ">" : "") << gr.devices[j];
    std::cout << ", layers";
    for (std::size_t j = 0; j + 1 < gr.splits.size(); ++j) std::cout << " [" << gr.splits[j] << "," << gr.splits[j + 1] << ")";
    std::cout << ", share " << gr.share << ", micro-batch " << gr.micro_batch << ", time " << gr.time_s
              << " s, bottleneck " << gr.bottleneck << "\n";
  }
}

// What is planned: a cluster file's cluster, or a scenario's world at its first slot (its
// events and traces there applied), with the model `--model` names or the file's own.
struct plan_input {
  planner::model_profile model;
  planner::cluster_state cluster;
  planner::planner_config cfg;
  planner::budgets budget;
};

result<plan_input> load_input(const plan_options& o) {
  if (o.cluster.empty() == o.scenario.empty()) return make_error("bad_usage", "pass one of --cluster and --scenario");
  plan_input in;
  std::string model_name = o.model;
  if (!o.cluster.empty()) {
    auto cf = config::load_cluster_file(o.cluster);
    if (!cf) return cf.err();
    if (model_name.empty()) model_name = cf->model;
    if (model_name.empty()) return make_error("bad_usage", "no model: pass --model or set 'model' in the cluster file");
    in.cluster = cf->cluster;
    in.cfg = cf->planner;
    in.budget = cf->budget;
  } else {
    auto sc = config::load_scenario_file(o.scenario);
    if (!sc) return sc.err();
    in.model = sc->model;
    sim::world w(*sc);
    in.cluster = w.at(0);
    in.cfg = sc->cfg;
    in.budget = sc->budget;
  }
  if (!model_name.empty()) {
    auto model = config::load_profile(model_name);
    if (!model) return model.err();
    in.model = std::move(*model);
  }
  return in;
}

int plan_main(const plan_options& o) {
  auto in = load_input(o);
  if (!in) return report(in.err());
  auto pol = planner::make_policy(o.policy);
  if (!pol) return report(pol.err());
  if (auto s = planner::validate(in->model, in->cluster, in->cfg); !s) return report(s.err());
  planner::problem prob(in->model, in->cluster, in->cfg, in->budget);
  auto pl = (*pol)->decide({prob, nullptr, {}, 0});
  if (!pl) return report(pl.err());
  auto rep = planner::evaluate(prob, *pl, nullptr, {});
  if (!rep) return report(rep.err());
  if (o.json) {
    std::cout << config::report_to_json(o.policy, *rep).dump(2) << "\n";
  } else {
    print_report(o.policy, *rep);
  }
  return exit_ok;
}

}  // namespace

void add_plan(CLI::App& app, runner& run) {
  auto o = std::make_shared<plan_options>();
  auto* sub = app.add_subcommand("plan", "Plan one slot for a cluster and a model, and explain the plan");
  auto* cluster = sub->add_option("--cluster", o->cluster, "Cluster YAML (docs/FORMATS.md)");
  sub->add_option("--scenario", o->scenario, "Instead of --cluster: a scenario YAML, planned at its first slot")->excludes(cluster);
  sub->add_option("--model", o->model, "Built-in profile name or profile JSON path (default: the file's 'model')");
  sub->add_option("--policy", o->policy, "Policy name (default joint_lyapunov)")
      ->check(CLI::IsMember(planner::policy_names()));
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([o, &run] { run = [o] { return plan_main(*o); }; });
}

}  // namespace dynapar::cli
