// `dynapar train`: a real model trained by device and group actors in this process, with a
// plan the policy computes once at the start (or the job's explicit plan); --verify repeats
// the job on one plain device and compares the parameters.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include "actors/trainer.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "config/job_file.hpp"
#include "config/profile_json.hpp"
#include "config/report_json.hpp"
#include "data/sampler.hpp"
#include "logging/logging.hpp"
#include "model/api.hpp"
#include "planner/evaluate.hpp"
#include "planner/policy.hpp"

namespace dynapar::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct train_options {
  std::string job, out = "out/train";
  bool verify = false;
  std::int64_t steps = 0;
};

// Speeds relative to the fastest device, which runs at this machine's speed: the planner
// prices plans with them and the device actors are dilated to them.
planner::cluster_state relative_speeds(const planner::cluster_state& c) {
  planner::cluster_state out = c;
  double top = 0;
  for (const auto& d : c.devices) top = std::max(top, d.speed);
  for (auto& d : out.devices) d.speed /= top;
  return out;
}

result<planner::plan> choose_plan(const config::job& j, const planner::cluster_state& cluster,
                                  const planner::model_profile& profile) {
  if (j.plan) return *j.plan;
  auto pol = planner::make_policy(j.policy);
  if (!pol) return pol.err();
  if (auto v = planner::validate(profile, cluster, j.cluster.planner); !v) return v.err();
  planner::problem prob(profile, cluster, j.cluster.planner, j.cluster.budget);
  auto pl = (*pol)->decide({prob, nullptr, {}, 0});
  if (!pl) return pl.err();
  if (auto rep = planner::evaluate(prob, *pl, nullptr, {}))
    logging::get("train")->info("plan by {}: {} (predicted {:.4f} s a step)", j.policy, planner::describe(*pl), rep->batch_time_s);
  return pl;
}

int train_main(const train_options& o) {
  auto j = config::load_job_file(o.job);
  if (!j) return report(j.err());
  auto log = logging::get("train");
  model::set_threads(j->threads);
  const model::optimizer_config opt{j->optimizer, j->lr, j->momentum, j->weight_decay};
  data::dataset train_set, test_set;
  if (j->data == "synthetic") {
    train_set = data::synthetic(j->synthetic_samples, j->seed);
    test_set = data::synthetic(std::max(1000, j->synthetic_samples / 6), j->seed + 1);
  } else {
    auto tr = data::load_fashion_mnist(data::fashion_mnist_dir, "train");
    if (!tr) return report(tr.err());
    auto te = data::load_fashion_mnist(data::fashion_mnist_dir, "t10k");
    if (!te) return report(te.err());
    train_set = std::move(*tr);
    test_set = std::move(*te);
  }
  auto m = model::make_model(j->model, j->seed);
  if (!m) return report(m.err());
  const planner::cluster_state cluster = j->emulate ? relative_speeds(j->cluster.cluster) : j->cluster.cluster;
  // The planner needs this model's profile on this machine: measure it.
  auto profile = model::measure_profile(**m, 32, 2, opt);
  if (!profile) return report(profile.err());
  auto pl = choose_plan(*j, cluster, *profile);
  if (!pl) return report(pl.err());
  const int batch = j->cluster.planner.batch;
  const data::global_sampler sampler_info(train_set.size(), batch, j->seed);
  std::int64_t steps = o.steps > 0 ? o.steps : j->steps > 0 ? j->steps
                                                             : static_cast<std::int64_t>(j->epochs * sampler_info.steps_per_epoch());
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return report(make_error("io", "cannot create '" + o.out + "': " + ec.message()));
  std::ofstream metrics(fs::path(o.out) / "metrics.jsonl");
  const bool tty = isatty(STDERR_FILENO);
  const std::string plan_text = planner::describe(*pl);
  actors::train_settings s;
  s.plan = *pl;
  s.steps = steps;
  s.batch = batch;
  s.seed = j->seed;
  s.optimizer = opt;
  s.hash_every = j->hash_every;
  if (j->emulate)
    for (const auto& d : cluster.devices)
      if (d.speed < 1) s.speeds[d.id] = d.speed;
  if (j->replan_every > 0)
    s.controller = actors::controller_config{j->policy, *profile, cluster, j->cluster.planner, j->cluster.budget, j->replan_every};
  stopwatch sw;
  auto outcome = actors::train(**m, train_set, s, [&](const actors::step_record& r) {
    json stages = json::array();
    for (const auto& st : r.stages)
      stages.push_back({{"device", st.device}, {"compute_s", st.compute_s}, {"wait_s", st.wait_s}, {"messages", st.messages}});
    metrics << json{{"step", r.step}, {"loss", r.loss}, {"time_s", r.time_s}, {"pipeline_s", r.pipeline_s}, {"stages", stages}}.dump()
            << "\n";
    if (tty && (r.step % 10 == 0 || r.step + 1 == steps)) {
      const int width = 30, filled = static_cast<int>(width * (r.step + 1) / steps);
      std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] step " << r.step + 1 << "/" << steps
                << "  loss " << std::fixed << std::setprecision(4) << r.loss << "  " << std::setprecision(0)
                << batch / r.time_s << " samples/s  " << plan_text << std::defaultfloat << std::flush;
      if (r.step + 1 == steps) std::cerr << "\n";
    }
  });
  if (!outcome) return report(outcome.err());
  const double acc = model::accuracy(outcome->final_layers, test_set);
  json summary = {{"job", j->name},
                  {"model", j->model},
                  {"steps", outcome->steps},
                  {"batch", batch},
                  {"mean_step_time_s", outcome->mean_step_time_s},
                  {"samples_per_s", outcome->samples_per_s},
                  {"final_test_accuracy", acc},
                  {"plan", config::plan_to_json(*pl)},
                  {"replica_hash_checks", outcome->hash_checks},
                  {"samples_lost", outcome->ledger.lost},
                  {"samples_duplicated", outcome->ledger.duplicated},
                  {"exact", j->exact},
                  {"replans", outcome->replans},
                  {"layers_moved", outcome->layers_moved},
                  {"final_plan", config::plan_to_json(outcome->final_plan)},
                  {"wall_s", sw.seconds()}};
  if (o.verify) {
    log->info("verify: the same {} steps on one plain device", steps);
    model::reference ref(**m, opt);
    data::global_sampler sampler(train_set.size(), batch, j->seed);
    // Exact jobs accumulate over the same fixed micro-batches as every group does.
    const int micro = j->exact ? j->cluster.planner.micro_batch : 0;
    for (std::int64_t t = 0; t < steps; ++t) ref.step(train_set, sampler.step_samples(t), micro);
    summary["reference_max_rel_diff"] = model::max_rel_diff(outcome->final_layers, ref.layers());
    summary["reference_test_accuracy"] = model::accuracy(ref.layers(), test_set);
  }
  std::ofstream(fs::path(o.out) / "summary.json") << summary.dump(2) << "\n";
  std::cout << summary.dump(2) << "\n";
  return exit_ok;
}

int profile_main(const std::string& name, int batch, int repeat, const std::string& out) {
  model::set_threads(1);
  auto m = model::make_model(name, 1);
  if (!m) return report(m.err());
  auto p = model::measure_profile(**m, batch, repeat, {});
  if (!p) return report(p.err());
  const auto text = config::profile_to_json(*p).dump(2);
  if (out.empty()) {
    std::cout << text << "\n";
  } else {
    std::ofstream f(out);
    if (!(f << text << "\n")) return report(make_error("io", "cannot write '" + out + "'"));
  }
  return exit_ok;
}

}  // namespace

void add_train(CLI::App& app, runner& run) {
  auto o = std::make_shared<train_options>();
  auto* sub = app.add_subcommand("train", "Train a model with device and group actors in this process");
  sub->add_option("job", o->job, "Job YAML (docs/FORMATS.md)")->required();
  sub->add_option("--out", o->out, "Directory for metrics.jsonl and summary.json (default out/train)");
  sub->add_flag("--verify", o->verify, "Also run the job on one plain device and report reference_max_rel_diff");
  sub->add_option("--steps", o->steps, "Override the job's length")->check(CLI::Range(1, 100000000));
  sub->callback([o, &run] { run = [o] { return train_main(*o); }; });

  auto p = std::make_shared<std::tuple<std::string, int, int, std::string>>("", 64, 5, "");
  auto* prof = app.add_subcommand("profile", "Measure a model's per-layer times and sizes here; print the planner profile JSON");
  prof->add_option("model", std::get<0>(*p), "Built-in model or TorchScript .pt file")->required();
  prof->add_option("--batch", std::get<1>(*p), "Samples per timed run")->check(CLI::Range(1, 4096));
  prof->add_option("--repeat", std::get<2>(*p), "Timed runs per layer")->check(CLI::Range(1, 1000));
  prof->add_option("--out", std::get<3>(*p), "Write the JSON here instead of stdout");
  prof->callback([p, &run] { run = [p] { return profile_main(std::get<0>(*p), std::get<1>(*p), std::get<2>(*p), std::get<3>(*p)); }; });
}

}  // namespace dynapar::cli
