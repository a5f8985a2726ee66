// `dynapar train`: a real model trained by device, group and controller actors in this
// process (training/prepare.hpp turns the job into settings); writes metrics.jsonl, plans.jsonl and
// summary.json; --verify repeats the job on one plain device and compares the parameters.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "actors/trainer.hpp"
#include "cli_util.hpp"
#include "common/memory_cap.hpp"
#include "commands.hpp"
#include "training/checkpoint_files.hpp"
#include "training/compare.hpp"
#include "training/records_json.hpp"
#include "training/verify.hpp"
#include "train_job.hpp"
#include "comm/packet.hpp"
#include "config/job_file.hpp"
#include "config/profile_json.hpp"
#include "logging/logging.hpp"
#include "model/api.hpp"
#include "planner/policy.hpp"
#include "live_dashboard.hpp"
#include "report/progress.hpp"
#include "report/summary_text.hpp"

namespace dynapar::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// --compare's mistakes, found before the run rather than after it.
status check_compare(const training::prepared_job& prep, const train_options& o) {
  if (o.compare.empty()) return ok_status();
  if (!prep.settings.controller) return make_error("bad_flag", "--compare needs a job re-planned online (replan_every > 0)");
  if (!o.resume.empty()) return make_error("bad_flag", "--compare compares whole runs from step 0: not with --resume");
  for (const auto& name : o.compare)
    if (auto p = planner::make_policy(name); !p) return make_error("bad_flag", "--compare: " + p.err().message);
  return ok_status();
}

// --compare's runs as summary.json's "compare" list (docs/FORMATS.md).
// With a cost budget (`budget` a number), each baseline is marked feasible or not: its
// average cost a step within the budget or over it.
json compare_json(const std::vector<training::policy_run>& runs, const json& budget) {
  json out = json::array();
  for (const auto& r : runs) {
    out.push_back({{"policy", r.policy}, {"steps", r.steps}, {"mean_step_time_s", r.mean_step_time_s},
                   {"this_run_mean_step_time_s", r.this_run_mean_step_time_s}, {"speedup", r.speedup}, {"avg_cost", r.avg_cost}});
    if (budget.is_number()) out.back()["within_budget"] = r.avg_cost <= budget.get<double>();
  }
  return out;
}

// A run that stopped (or could not start for a reason other than its input): summary.json
// says why.
void write_error_summary(const std::string& out, const std::string& job, const std::string& why) {
  std::error_code ec;
  fs::create_directories(out, ec);
  std::ofstream(fs::path(out) / "summary.json") << json{{"job", job}, {"error", why}}.dump(2) << "\n";
}

}  // namespace

int train_main(const train_options& o, const train_fn& how) {
  auto offload = offload_dir_from_env();  // before the set-up's profile
  if (!offload) return report(offload.err());
  // Over nodes this process holds no layer: it keeps the model's outline, not the model.
  auto prep = training::prepare_job(o.job, o.steps, o.place, how != nullptr);
  if (!prep) {
    if (report_exit(prep.err()) == exit_failed) write_error_summary(o.out, o.job, prep.err().message);  // a model failing here
    return report(prep.err());
  }
  if (prep->job.cluster.described && !how)
    return report(make_error("bad_job", "job '" + prep->job.name + "' lists no devices: its nodes describe them as they join, so it runs "
                                        "over nodes: dynapar launch --local N, or dynapar controller with dynapar node --devices auto "
                                        "(docs/CLUSTERS.md)"));
  if (auto st = check_compare(*prep, o); !st) return report(st.err());
  prep->settings.pipelined_control = !o.serial_control;
  prep->settings.optimizer.offload_dir = *offload;
  for (const auto& [id, place] : prep->job.cluster.places)
    if (!offload->empty() && place != "cpu")
      return report(make_error("bad_flag", "--offload-optimizer keeps optimizer state in host files; device " + std::to_string(id) +
                                               " computes on " + place + " (a GPU's state stays in its memory)"));
  // --verify compares optimizer state too; a saved model needs the parameters; otherwise the
  // end needs each layer's hash only (the devices evaluated the test set).
  prep->settings.final_layers = o.verify ? training::train_settings::final_form::whole
                                : !o.save_model.empty() ? training::train_settings::final_form::lean
                                                        : training::train_settings::final_form::hash;
  if (!o.hysteresis.empty()) {
    if (!prep->settings.controller) return report(make_error("bad_flag", "--hysteresis needs a job re-planned online (replan_every > 0)"));
    prep->job.hysteresis = prep->settings.controller->core.hysteresis = o.hysteresis == "on";
  }
  nlohmann::json against;  // the other run's layer hashes, checked before this run trains
  if (!o.verify_against.empty()) {
    auto other = training::other_run(o.verify_against, *prep, prep->settings.steps);
    if (!other) return report(other.err());
    against = std::move(*other);
  }
  const std::string checkpoint_dir = o.checkpoint_dir.empty() ? o.resume : o.checkpoint_dir;
  const auto fingerprint = training::job_fingerprint(*prep);
  if (!o.resume.empty()) {
    auto c = training::load_checkpoint(o.resume, prep->job.name, fingerprint, *prep->model);
    if (!c) return report(c.err());
    for (const auto& why : c->passed_over) logging::get("train")->warn("passed over the damaged checkpoint {}", why);
    if (prep->settings.controller && c->at.controller) prep->settings.controller->restore = c->at.controller;
    logging::get("train")->info("resuming from '{}' at step {}", o.resume, c->at.step);
    prep->settings.resume = std::move(c->at);
  }
  // Consistent cuts every N steps, the rollback point of crash recovery, written in shards by
  // the layers' holders. Without a checkpoint directory they go to OUT/rollback, the newest
  // only, removed when the run ends well: no layer passes through this process either way.
  prep->settings.checkpoint_every = o.checkpoint_every > 0 ? o.checkpoint_every : 50;
  const bool rollback_only = checkpoint_dir.empty();
  const std::string cut_dir = rollback_only ? (fs::path(o.out) / "rollback").string() : checkpoint_dir;
  {
    std::error_code ec;
    fs::create_directories(cut_dir, ec);
    if (ec) return report(make_error("io", "cannot create '" + cut_dir + "': " + ec.message()));
  }
  training::checkpoint_writer checkpoints({cut_dir, prep->job.name, fingerprint, rollback_only ? 1 : o.keep_checkpoints});
  const config::job* j = &prep->job;
  const auto& s = prep->settings;
  const auto& test_set = prep->test_set;
  const auto steps = s.steps;
  const int batch = s.batch;
  const double scale = prep->scale;
  auto log = logging::get("train");
  planner::plan first_plan = s.plan;
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return report(make_error("io", "cannot create '" + o.out + "': " + ec.message()));
  std::ofstream metrics(fs::path(o.out) / "metrics.jsonl");
  std::ofstream plans(fs::path(o.out) / "plans.jsonl");
  std::unique_ptr<live_dashboard> board;
  if (o.dashboard_port >= 0) {
    if (!comm::is_loopback(o.dashboard_host) && o.dashboard_token.empty())
      return report(make_error("bad_flag", "--dashboard-host " + o.dashboard_host +
                                               " is reachable beyond this machine: the run's state needs --dashboard-token TOKEN "
                                               "(or bind 127.0.0.1)"));
    auto srv = dashboard::server::start({o.dashboard_host, o.dashboard_port, o.dashboard_token});
    if (!srv) return report(srv.err());
    board = std::make_unique<live_dashboard>(std::move(*srv), *prep);
    const std::string url = "http://" + o.dashboard_host + ":" + std::to_string(board->port()) + "/";
    // The file (in the user's own directory) has the address to open; the log never shows the token.
    std::ofstream(fs::path(o.out) / "dashboard.url") << url << (o.dashboard_token.empty() ? "" : "?token=" + o.dashboard_token) << "\n";
    log->info("dashboard: {} (JSON at {}api/state, Prometheus at {}metrics{})", url, url, url,
              o.dashboard_token.empty() ? "" : "; each with the token");
  }
  // The live status: one line kept up to date on a terminal, plain lines in a log.
  const bool tty = isatty(STDERR_FILENO);
  stopwatch sw;
  report::progress_meter meter(steps, batch);
  bool status_shown = false;
  auto status_line = [&](bool finish) {
    if (!tty) return;
    std::cerr << "\r" << meter.line() << "\033[K" << (finish ? "\n" : "") << std::flush;
    status_shown = !finish;
  };
  auto log_line = [&](auto&&... args) {  // a log line does not land inside the status line
    if (status_shown) std::cerr << "\r\033[K";
    status_shown = false;
    log->info(std::forward<decltype(args)>(args)...);
  };
  training::train_callbacks cb;
  cb.on_plan = [&](const training::plan_record& r) {
    if (r.step == 0) first_plan = r.plan;
    meter.plan(planner::brief(r.plan));
    if (board) board->plan(r);
    plans << training::plan_json(r).dump() << "\n" << std::flush;  // followed live (tests/cli/launch_elastic.sh)
    if (r.step > 0)
      log_line("step {}: new plan {} ({} layers moved, {:.1f} MB): {}", r.step, planner::describe(r.plan), r.layers_moved,
               r.bytes_migrated / 1e6, r.reason);
  };
  std::map<std::int64_t, double> step_times;
  double epoch_loss = 0;
  int epoch_steps = 0;
  cb.on_step = [&](const training::step_record& r) {
    auto row = training::step_json(r);
    row["process_cpu_s"] = own_usage().cpu_s;  // over nodes: the controller's process alone
    metrics << row.dump() << "\n" << std::flush;
    if (!o.compare.empty() && r.step < o.compare_steps) step_times[r.step] = r.time_s;  // a re-run step: its last attempt
    epoch_loss += r.loss;
    ++epoch_steps;
    meter.step(r.step, r.time_s, r.loss, sw.seconds());
    if (board) board->step(r, meter);
    if (tty)
      status_line(r.step + 1 == steps);
    else if (meter.plain_due())
      log->info("{}", meter.line());
  };
  prep->settings.test_set = &test_set;  // evaluated where the layers are
  cb.on_epoch = [&](std::int64_t epoch, double acc) {
    const std::int64_t per_epoch = std::max(1, prep->train_set.size() / batch);
    log_line("epoch {}/{}: train loss {:.4f}, test {} {:.4f}", epoch, (steps + per_epoch - 1) / per_epoch,
             epoch_steps > 0 ? epoch_loss / epoch_steps : 0.0, model::metric_name(test_set), acc);
    if (board) board->epoch(epoch, acc, model::metric_name(test_set));
    epoch_loss = 0;
    epoch_steps = 0;
  };
  // Faults share metrics.jsonl with the steps, told apart by "event" (docs/FORMATS.md).
  cb.on_fault = [&](const training::fault_record& r) {
    if (r.event == "injected") meter.fault();
    if (board) board->fault(r);
    metrics << training::fault_json(r).dump() << "\n" << std::flush;
  };
  cb.on_checkpoint = [&](training::checkpoint& c) { return checkpoints.write(c); };
  cb.shard_dir = [&](std::int64_t step) { return checkpoints.shard_dir(step); };
  cb.shard_root = fs::absolute(cut_dir).string();
  auto outcome = how ? how(*prep, cb) : actors::train(*prep->model, prep->train_set, s, cb);
  // A checkpoint that could not be written (a full disk) does not stop the training: the one
  // before it stays the newest, the run ends and says so, and exits with an error. A rollback
  // point only (no checkpoint directory) was logged, and the one before it served.
  std::vector<std::string> unwritten = checkpoints.finish();
  if (rollback_only) {
    unwritten.clear();
    if (outcome) fs::remove_all(cut_dir, ec);  // else left to resume from
  }
  if (!outcome) {
    write_error_summary(o.out, j->name, outcome.err().message);
    return report(outcome.err());
  }
  if (!o.save_model.empty())
    if (auto st = model::save_model(*prep->model, outcome->final_layers, o.save_model); !st) return report(st.err());
  const double acc = outcome->test_metric.value_or(std::nan(""));  // the devices', test_set being set
  json summary = training::summary_json(*j, batch, *outcome, {first_plan, acc, model::metric_name(test_set), scale, sw.seconds()});
  const auto usage = own_usage();  // the run's, before --compare and --verify train again
  summary["process"] = {{"cpu_s", usage.cpu_s}, {"max_rss_mb", usage.max_rss_mb}};
  if (const auto cap = rss_cap_from_env(std::getenv("DYNAPAR_MAX_RSS_MB")); cap && *cap > 0) summary["process"]["max_rss_cap_mb"] = *cap;
  if (!o.compare.empty()) {
    const training::train_fn run = [&](const training::train_settings& other, const training::train_callbacks& c) {
      return actors::train(*prep->model, prep->train_set, other, c);
    };
    auto side = training::compare_policies(prep->settings, o.compare, o.compare_steps, step_times, run);
    if (!side) return report(side.err());
    summary["compare"] = compare_json(*side, summary.value("budget", json()));
  }
  training::reference_check check;
  if (o.verify) {
    log->info("verify: the same {} steps on one plain device, computing on {}", steps, prep->reference_place);
    check = training::check_against_reference(*prep, steps, outcome->final_layers, outcome->replica_hashes);
    // JSON has no infinity or NaN: a difference without bound is written as "inf" or "nan".
    const double d = check.max_rel_diff;
    summary["reference_max_rel_diff"] = std::isfinite(d) ? json(d) : json(std::isnan(d) ? "nan" : "inf");
    summary[std::string("reference_test_") + model::metric_name(test_set)] = check.reference_accuracy;
    summary["verify_tolerance"] = check.tolerance;
    summary["replicas_verified"] = check.replicas_checked;
    summary["replicas_differing"] = check.replicas_differing;
    summary["verified"] = check.verified();
  }
  const auto hashes = training::layer_hashes_json(*prep, steps, outcome->final_hashes);
  std::ofstream(fs::path(o.out) / training::layer_hashes_file) << hashes.dump(2) << "\n";
  std::vector<int> differing;
  if (!against.is_null()) {
    differing = training::layers_differing(hashes, against);
    summary["verified_against"] = o.verify_against;
    summary["layers_differing"] = differing;
  }
  if (!unwritten.empty()) summary["checkpoints_not_written"] = unwritten;

  std::ofstream(fs::path(o.out) / "summary.json") << summary.dump(2) << "\n";
  if (board) board->finish(summary);
  std::cout << report::human_summary(summary, o.out);
  if (!against.is_null() && !differing.empty()) {
    std::cerr << "dynapar: verify FAILED: " << differing.size() << " of " << hashes["layers"].size() << " layers differ from the run in '"
              << o.verify_against << "' (the first: layer " << differing.front() << ")\n";
    return exit_mismatch;
  }
  if (!against.is_null())
    std::cerr << "dynapar: verify ok: all " << hashes["layers"].size() << " layers bit for bit those of the run in '" << o.verify_against
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
  if (!unwritten.empty())
    return report(make_error("io", std::to_string(unwritten.size()) + " checkpoint(s) could not be written, the first " + unwritten.front()));
  return exit_ok;
}

void add_verify_flags(CLI::App* sub, train_options& o) {
  sub->add_flag("--verify", o.verify, "Also run the job on one plain device and report reference_max_rel_diff");
  sub->add_option("--verify-against", o.verify_against,
                  "Compare every layer's whole state, bit for bit, with the run of the same exact job whose --out this is "
                  "(for a model one device cannot hold; docs/RELIABILITY.md)");
}

void add_dashboard_flags(CLI::App* sub, train_options& o) {
  sub->add_option("--dashboard", o.dashboard_port,
                  "Serve a live dashboard (web page, /api/state JSON, /metrics for Prometheus) on this port; 0: any free port")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--dashboard-host", o.dashboard_host, "Address the dashboard binds (default 127.0.0.1, loopback only)");
  sub->add_option("--dashboard-token", o.dashboard_token,
                  "A secret every dashboard request must carry (?token= or Authorization: Bearer); required beyond loopback");
}

void add_step_flags(CLI::App* sub, train_options& o) {
  sub->add_flag("--serial-control", o.serial_control,
                "Start each step only once the step before is confirmed (default: pipelined control, docs/RUNTIME.md)");
}

void add_checkpoint_flags(CLI::App* sub, train_options& o) {
  sub->add_option("--checkpoint-dir", o.checkpoint_dir, "Write checkpoints into this directory (docs/RELIABILITY.md)");
  sub->add_option("--checkpoint-every", o.checkpoint_every, "Steps between checkpoints (default 50)")->check(CLI::Range(1, 100000000));
  sub->add_option("--keep-checkpoints", o.keep_checkpoints, "Keep only the newest K checkpoints (default 0: all)")
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--resume", o.resume,
                  "Continue from the newest complete checkpoint in this directory (and keep writing there); a damaged newer one "
                  "is passed over, a changed job refused");
}

namespace {

struct profile_options {
  std::string model, out, place = "cpu";
  int batch = 64, repeat = 5;
};

int profile_main(const profile_options& o) {
  model::set_threads(1);
  auto m = model::make_model(o.model, 1);
  if (!m) return report(m.err());
  auto p = model::measure_profile(**m, o.batch, o.repeat, {}, o.place);
  if (!p) return report(p.err());
  const auto text = config::profile_to_json(*p).dump(2);
  if (o.out.empty()) {
    std::cout << text << "\n";
  } else {
    std::ofstream f(o.out);
    if (!(f << text << "\n")) return report(make_error("io", "cannot write '" + o.out + "'"));
  }
  return exit_ok;
}

}  // namespace

void add_train(CLI::App& app, runner& run) {
  auto o = std::make_shared<train_options>();
  auto* sub = app.add_subcommand("train", "Train a model with device and group actors in this process");
  sub->add_option("job", o->job, "Job YAML (docs/FORMATS.md)")->required();
  sub->add_option("--out", o->out, "Directory for metrics.jsonl and summary.json (default out/train)");
  add_verify_flags(sub, *o);
  sub->add_option("--save-model", o->save_model, "Write the trained TorchScript model here (.pt, loads in PyTorch)");
  sub->add_option("--steps", o->steps, "Override the job's length")->check(CLI::Range(1, 100000000));
  sub->add_option("--place", o->place, "Put every device on this place, cpu or cuda:N, at its real speed (docs/GPU.md)");
  sub->add_option("--hysteresis", o->hysteresis, "on or off: override the job's hysteresis (docs/MODEL.md)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--compare", o->compare, "After the run, train the first --compare-steps steps with these policies too "
                                           "(comma-separated, e.g. dp_even,dp_balanced) and compare step times")
      ->delimiter(',');
  sub->add_option("--compare-steps", o->compare_steps, "Steps of each side-by-side run (default 100)")
      ->check(CLI::Range(1, 100000000));
  add_checkpoint_flags(sub, *o);
  add_step_flags(sub, *o);
  add_dashboard_flags(sub, *o);
  sub->callback([o, &run] { run = [o] { return train_main(*o, nullptr); }; });

  auto p = std::make_shared<profile_options>();
  auto* prof = app.add_subcommand("profile", "Measure a model's per-layer times and sizes here; print the planner profile JSON");
  prof->add_option("model", p->model, "Built-in model or TorchScript .pt file")->required();
  prof->add_option("--batch", p->batch, "Samples per timed run")->check(CLI::Range(1, 4096));
  prof->add_option("--repeat", p->repeat, "Timed runs per layer")->check(CLI::Range(1, 1000));
  prof->add_option("--out", p->out, "Write the JSON here instead of stdout");
  prof->add_option("--place", p->place, "Where to measure: cpu or cuda:N (default cpu; docs/GPU.md)");
  prof->callback([p, &run] { run = [p] { return profile_main(*p); }; });
}

}  // namespace dynapar::cli
