// `dynapar train`: a real model trained by device, group and controller actors in this
// process (training/prepare.hpp turns the job into settings); writes metrics.jsonl, plans.jsonl and
// summary.json; --verify repeats the job on one plain device and compares the parameters.
#include <fstream>
#include <iostream>

#include "actors/trainer.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "config/profile_json.hpp"
#include "model/api.hpp"
#include "run_console.hpp"
#include "train_job.hpp"

namespace dynapar::cli {

int train_main(const train_options& o, const train_fn& how) {
  auto offload = offload_dir_from_env();  // before the set-up's profile
  if (!offload) return report(offload.err());
  // Over nodes this process holds no layer: it keeps the model's outline, not the model.
  auto prep = training::prepare_job(o.job, o.steps, o.place, how != nullptr);
  if (!prep) {
    if (report_exit(prep.err()) == exit_failed) training::write_error_summary(o.run.out, o.job, prep.err().message);  // a model failing here
    return report(prep.err());
  }
  if (prep->job.cluster.described && !how)
    return report(make_error("bad_job", "job '" + prep->job.name + "' lists no devices: its nodes describe them as they join, so it runs "
                                        "over nodes: dynapar launch --local N, or dynapar controller with dynapar node --devices auto "
                                        "(docs/CLUSTERS.md)"));
  auto opts = o.run;
  opts.offload_dir = *offload;
  if (auto st = training::check_session(*prep, opts); !st) return report(st.err());
  auto console = run_console::start(o, *prep);
  if (!console) return report(console.err());
  const training::train_fn here = [&](const training::train_settings& s, const training::train_callbacks& cb) {
    return actors::train(*prep->model, prep->train_set, s, cb);
  };
  const training::session_trainer train = how ? how : [&](training::prepared_job& p, const training::train_callbacks& cb) { return here(p.settings, cb); };
  auto done = training::run_session(*prep, opts, train, here, (*console)->watch());
  if (!done) return report(done.err());
  return (*console)->finish(*done, opts);
}

void add_verify_flags(CLI::App* sub, train_options& o) {
  sub->add_flag("--verify", o.run.verify, "Also run the job on one plain device and report reference_max_rel_diff");
  sub->add_option("--verify-against", o.run.verify_against,
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
  sub->add_flag_function("--serial-control", [&o](std::int64_t n) { o.run.pipelined_control = n == 0; },
                "Start each step only once the step before is confirmed (default: pipelined control, docs/RUNTIME.md)");
}

void add_checkpoint_flags(CLI::App* sub, train_options& o) {
  sub->add_option("--checkpoint-dir", o.run.checkpoint_dir, "Write checkpoints into this directory (docs/RELIABILITY.md)");
  sub->add_option("--checkpoint-every", o.run.checkpoint_every, "Steps between checkpoints (default 50)")->check(CLI::Range(1, 100000000));
  sub->add_option("--keep-checkpoints", o.run.keep_checkpoints, "Keep only the newest K checkpoints (default 0: all)")
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--resume", o.run.resume,
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
  sub->add_option("--out", o->run.out, "Directory for metrics.jsonl and summary.json (default out/train)");
  add_verify_flags(sub, *o);
  sub->add_option("--save-model", o->run.save_model, "Write the trained TorchScript model here (.pt, loads in PyTorch)");
  sub->add_option("--steps", o->steps, "Override the job's length")->check(CLI::Range(1, 100000000));
  sub->add_option("--place", o->place, "Put every device on this place, cpu or cuda:N, at its real speed (docs/GPU.md)");
  sub->add_option("--hysteresis", o->run.hysteresis, "on or off: override the job's hysteresis (docs/MODEL.md)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--compare", o->run.compare, "After the run, train the first --compare-steps steps with these policies too "
                                           "(comma-separated, e.g. dp_even,dp_balanced) and compare step times")
      ->delimiter(',');
  sub->add_option("--compare-steps", o->run.compare_steps, "Steps of each side-by-side run (default 100)")
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
