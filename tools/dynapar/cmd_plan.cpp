// `dynapar plan`: one slot's decision for a cluster file and a model, with its explanation.
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli_util.hpp"
#include "commands.hpp"
#include "config/cluster_file.hpp"
#include "config/profile_json.hpp"
#include "config/report_json.hpp"
#include "planner/evaluate.hpp"
#include "planner/policy.hpp"

namespace dynapar::cli {
namespace {

struct plan_options {
  std::string cluster, model, policy = "joint_lyapunov";
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

int plan_main(const plan_options& o) {
  auto cf = config::load_cluster_file(o.cluster);
  if (!cf) return report(cf.err());
  const std::string model_name = o.model.empty() ? cf->model : o.model;
  if (model_name.empty()) return report(make_error("bad_usage", "no model: pass --model or set 'model' in the cluster file"));
  auto model = config::load_profile(model_name);
  if (!model) return report(model.err());
  auto pol = planner::make_policy(o.policy);
  if (!pol) return report(pol.err());
  if (auto s = planner::validate(*model, cf->cluster, cf->planner); !s) return report(s.err());
  planner::problem prob(*model, cf->cluster, cf->planner, cf->budget);
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
  sub->add_option("--cluster", o->cluster, "Cluster YAML (docs/FORMATS.md)")->required();
  sub->add_option("--model", o->model, "Built-in profile name or profile JSON path (default: the cluster file's 'model')");
  sub->add_option("--policy", o->policy, "Policy name (default joint_lyapunov)")
      ->check(CLI::IsMember(planner::policy_names()));
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([o, &run] { run = [o] { return plan_main(*o); }; });
}

}  // namespace dynapar::cli
