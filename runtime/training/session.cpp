#include "training/session.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "logging/logging.hpp"
#include "planner/policy.hpp"
#include "training/checkpoint_files.hpp"
#include "training/records_json.hpp"

namespace dynapar::training {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// --compare's runs as summary.json's "compare" list (docs/FORMATS.md). With a cost budget
// (`budget` a number), each baseline is marked within it or not by its average cost a step.
json compare_json(const std::vector<policy_run>& runs, const json& budget) {
  json out = json::array();
  for (const auto& r : runs) {
    out.push_back({{"policy", r.policy}, {"steps", r.steps}, {"mean_step_time_s", r.mean_step_time_s},
                   {"this_run_mean_step_time_s", r.this_run_mean_step_time_s}, {"speedup", r.speedup}, {"avg_cost", r.avg_cost}});
    if (budget.is_number()) out.back()["within_budget"] = r.avg_cost <= budget.get<double>();
  }
  return out;
}

status make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error("io", "cannot create '" + dir + "': " + ec.message());
  return ok_status();
}

// The options into the run's settings, and the checkpoint it resumes from.
status settle(prepared_job& prep, const session_options& o) {
  auto& s = prep.settings;
  s.pipelined_control = o.pipelined_control;
  s.optimizer.offload_dir = o.offload_dir;
  // --verify compares optimizer state too; a saved model needs the parameters; otherwise the
  // end needs each layer's hash only (the devices evaluated the test set).
  s.final_layers = o.verify ? train_settings::final_form::whole
                   : !o.save_model.empty() ? train_settings::final_form::lean
                                           : train_settings::final_form::hash;
  if (!o.hysteresis.empty()) prep.job.hysteresis = s.controller->core.hysteresis = o.hysteresis == "on";
  s.checkpoint_every = o.checkpoint_every > 0 ? o.checkpoint_every : 50;
  s.test_set = &prep.test_set;  // evaluated where the layers are
  if (o.resume.empty()) return ok_status();
  auto c = load_checkpoint(o.resume, prep.job.name, job_fingerprint(prep), *prep.model);
  if (!c) return c.err();
  for (const auto& why : c->passed_over) logging::get("train")->warn("passed over the damaged checkpoint {}", why);
  if (s.controller && c->at.controller) s.controller->restore = c->at.controller;
  logging::get("train")->info("resuming from '{}' at step {}", o.resume, c->at.step);
  s.resume = std::move(c->at);
  return ok_status();
}

// After the run: --compare's side-by-side runs, --verify's plain device, the layers' hashes
// and --verify-against's comparison, into the summary.
status finish(prepared_job& prep, const session_options& o, const train_outcome& run, const json& against,
              const std::map<std::int64_t, double>& step_times, const train_fn& compare_with, session_outcome& out) {
  auto& summary = out.summary;
  if (!o.compare.empty()) {
    auto side = compare_policies(prep.settings, o.compare, o.compare_steps, step_times, compare_with);
    if (!side) return side.err();
    summary["compare"] = compare_json(*side, summary.value("budget", json()));
  }
  const auto steps = prep.settings.steps;
  if (o.verify) {
    logging::get("train")->info("verify: the same {} steps on one plain device, computing on {}", steps, prep.reference_place);
    out.check = check_against_reference(prep, steps, run.final_layers, run.replica_hashes);
    // JSON has no infinity or NaN: a difference without bound is written as "inf" or "nan".
    const double d = out.check.max_rel_diff;
    summary["reference_max_rel_diff"] = std::isfinite(d) ? json(d) : json(std::isnan(d) ? "nan" : "inf");
    summary[std::string("reference_test_") + model::metric_name(prep.test_set)] = out.check.reference_accuracy;
    summary["verify_tolerance"] = out.check.tolerance;
    summary["replicas_verified"] = out.check.replicas_checked;
    summary["replicas_differing"] = out.check.replicas_differing;
    summary["verified"] = out.check.verified();
  }
  const auto hashes = layer_hashes_json(prep, steps, run.final_hashes);
  std::ofstream(fs::path(o.out) / layer_hashes_file) << hashes.dump(2) << "\n";
  out.layers = hashes["layers"].size();
  if (!against.is_null()) {
    out.layers_differing = layers_differing(hashes, against);
    summary["verified_against"] = o.verify_against;
    summary["layers_differing"] = out.layers_differing;
  }
  if (!out.unwritten.empty()) summary["checkpoints_not_written"] = out.unwritten;
  std::ofstream(fs::path(o.out) / "summary.json") << summary.dump(2) << "\n";
  return ok_status();
}

}  // namespace

void write_error_summary(const std::string& out, const std::string& job, const std::string& why) {
  std::error_code ec;
  fs::create_directories(out, ec);
  std::ofstream(fs::path(out) / "summary.json") << json{{"job", job}, {"error", why}}.dump(2) << "\n";
}

status check_session(const prepared_job& prep, const session_options& o) {
  const bool online = prep.settings.controller.has_value();
  if (!o.compare.empty()) {
    if (!online) return make_error("bad_flag", "--compare needs a job re-planned online (replan_every > 0)");
    if (!o.resume.empty()) return make_error("bad_flag", "--compare compares whole runs from step 0: not with --resume");
    for (const auto& name : o.compare)
      if (auto p = planner::make_policy(name); !p) return make_error("bad_flag", "--compare: " + p.err().message);
  }
  for (const auto& [id, place] : prep.job.cluster.places)
    if (!o.offload_dir.empty() && place != "cpu")
      return make_error("bad_flag", "--offload-optimizer keeps optimizer state in host files; device " + std::to_string(id) +
                                        " computes on " + place + " (a GPU's state stays in its memory)");
  if (!o.hysteresis.empty() && !online) return make_error("bad_flag", "--hysteresis needs a job re-planned online (replan_every > 0)");
  return ok_status();
}

result<session_outcome> run_session(prepared_job& prep, const session_options& o, const session_trainer& train,
                                    const train_fn& compare_with, const session_watch& watch) {
  if (auto st = check_session(prep, o); !st) return st.err();
  json against;  // the other run's layer hashes, checked before this run trains
  if (!o.verify_against.empty()) {
    auto other = other_run(o.verify_against, prep, prep.settings.steps);
    if (!other) return other.err();
    against = std::move(*other);
  }
  if (auto st = settle(prep, o); !st) return st.err();
  // Consistent cuts every checkpoint_every steps, the rollback point of crash recovery,
  // written in shards by the layers' holders. Without a checkpoint directory they go to
  // out/rollback, the newest only, removed when the run ends well.
  const bool rollback_only = o.checkpoint_dir.empty() && o.resume.empty();
  const std::string cut_dir = rollback_only ? (fs::path(o.out) / "rollback").string() : o.checkpoint_dir.empty() ? o.resume : o.checkpoint_dir;
  for (const auto& dir : {cut_dir, o.out})
    if (auto st = make_dir(dir); !st) return st.err();
  checkpoint_writer checkpoints({cut_dir, prep.job.name, job_fingerprint(prep), rollback_only ? 1 : o.keep_checkpoints});
  std::ofstream metrics(fs::path(o.out) / "metrics.jsonl");
  std::ofstream plans(fs::path(o.out) / "plans.jsonl");
  planner::plan first_plan = prep.settings.plan;
  std::map<std::int64_t, double> step_times;  // --compare's: each step's last attempt
  double epoch_loss = 0;
  int epoch_steps = 0;
  train_callbacks cb;
  cb.on_plan = [&](const plan_record& r) {
    if (r.step == 0) first_plan = r.plan;
    plans << plan_json(r).dump() << "\n" << std::flush;  // followed live (tests/cli/launch_elastic.sh)
    if (watch.on_plan) watch.on_plan(r);
  };
  cb.on_step = [&](const step_record& r) {
    auto row = step_json(r);
    if (watch.cpu_s) row["process_cpu_s"] = watch.cpu_s();  // over nodes: the controller's process alone
    metrics << row.dump() << "\n" << std::flush;
    if (!o.compare.empty() && r.step < o.compare_steps) step_times[r.step] = r.time_s;
    epoch_loss += r.loss;
    ++epoch_steps;
    if (watch.on_step) watch.on_step(r);
  };
  cb.on_epoch = [&](std::int64_t epoch, double metric) {
    if (watch.on_epoch) watch.on_epoch(epoch, metric, epoch_steps > 0 ? epoch_loss / epoch_steps : 0.0);
    epoch_loss = 0;
    epoch_steps = 0;
  };
  // Faults share metrics.jsonl with the steps, told apart by "event" (docs/FORMATS.md).
  cb.on_fault = [&](const fault_record& r) {
    metrics << fault_json(r).dump() << "\n" << std::flush;
    if (watch.on_fault) watch.on_fault(r);
  };
  cb.on_checkpoint = [&](checkpoint& c) { return checkpoints.write(c); };
  cb.shard_dir = [&](std::int64_t step) { return checkpoints.shard_dir(step); };
  cb.shard_root = fs::absolute(cut_dir).string();
  auto run = train(prep, cb);
  // A checkpoint that could not be written (a full disk) does not stop the training: the one
  // before it stays the newest, the run ends and says so. A rollback point only was logged,
  // and the one before it served.
  session_outcome out;
  out.unwritten = checkpoints.finish();
  if (rollback_only) {
    out.unwritten.clear();
    std::error_code ec;
    if (run) fs::remove_all(cut_dir, ec);  // else left to resume from
  }
  if (!run) {
    write_error_summary(o.out, prep.job.name, run.err().message);
    return run.err();
  }
  if (!o.save_model.empty())
    if (auto st = model::save_model(*prep.model, run->final_layers, o.save_model); !st) return st.err();
  const double metric = run->test_metric.value_or(std::nan(""));  // the devices', test_set being set
  out.summary = summary_json(prep.job, prep.settings.batch, *run,
                             {first_plan, metric, model::metric_name(prep.test_set), prep.scale, watch.wall_s ? watch.wall_s() : 0.0,
                              prep.train_set.store ? prep.train_set.store->read_ahead_figures() : data::sample_store::read_figures{}});
  if (watch.process) out.summary["process"] = watch.process();  // the run's, before --compare and --verify train again
  if (auto st = finish(prep, o, *run, against, step_times, compare_with, out); !st) return st.err();
  return out;
}

}  // namespace dynapar::training
