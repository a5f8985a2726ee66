#include "training/prepare.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include "config/profile_json.hpp"
#include "data/sampler.hpp"
#include "data/source.hpp"
#include "logging/logging.hpp"
#include "planner/evaluate.hpp"

namespace dynapar::training {
namespace {

// Speeds relative to this machine (one core): the fastest device runs at `scale`, the
// others in proportion, with `scale` chosen so that every device computing at once needs at
// most `cores` cores (sleeping dilates the rest): measured times then stay honest. The
// planner prices plans with these speeds and the device actors are dilated to them.
planner::cluster_state emulated_speeds(const planner::cluster_state& c, double cores, double& scale) {
  planner::cluster_state out = c;
  double top = 0, sum = 0;
  for (const auto& d : c.devices) top = std::max(top, d.speed);
  for (const auto& d : c.devices) sum += d.speed / top;
  scale = std::min(1.0, cores / sum);
  for (auto& d : out.devices) d.speed = d.speed / top * scale;
  return out;
}

// Without a controller the policy plans once, from the configured speeds.
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

// Step seconds of one micro-batch through every layer plus an update, by the profile.
double profile_step_s(const planner::model_profile& m, int micro) {
  double t = 0;
  for (const auto& l : m.layers) t += l.fixed_s + micro * (l.fwd_s + l.bwd_s) + l.update_s;
  return t;
}

// Devices on GPUs compute at their own speed: the model is profiled on each place the job's
// devices use, the planner gets the CPU's profile, and each device the speed of its place
// relative to it (a scalar: layers keep the CPU's proportions). The CPU is the base because
// pipelines form among the slower devices, whose per-layer proportions must be right for the
// splits and for the controller's speed estimates from a stage's time; a GPU that holds the
// whole model needs only its whole-model ratio, which the scalar gives exactly at the job's
// micro-batch. (With the GPU's proportions, on an H100, a CPU stage of the last, small layer
// looked 20 times faster than it was, and the controller moved the model onto it.)
status measure_places(prepared_job& p, int micro, const model::optimizer_config& opt) {
  const auto& job = p.job;
  if (job.emulate)
    return make_error("bad_job", "job '" + job.name + "': devices with a cuda place need 'emulate: false' (a GPU computes at its own speed)");
  if (!job.profile.empty()) return make_error("bad_job", "job '" + job.name + "': a job with cuda devices measures its profiles; drop 'profile'");
  std::map<std::string, planner::model_profile> by_place;
  by_place["cpu"];
  for (const auto& [id, place] : job.cluster.places) {
    if (auto st = model::check_place(place); !st) return make_error(st.err().code, "device " + std::to_string(id) + ": " + st.err().message);
    by_place[place];
  }
  for (auto& [place, profile] : by_place) {
    auto m = model::measure_profile(*p.model, micro, 15, opt, place);
    if (!m) return m.err();
    profile = std::move(*m);
    logging::get("train")->info("profile on {}: {:.3f} ms per micro-batch of {}", place, 1e3 * profile_step_s(profile, micro), micro);
  }
  p.profile = by_place["cpu"];
  const double base = profile_step_s(p.profile, micro);
  for (auto& d : p.cluster.devices) {
    const auto it = job.cluster.places.find(d.id);
    d.speed = base / profile_step_s(by_place[it == job.cluster.places.end() ? "cpu" : it->second], micro);
  }
  return ok_status();
}

// The devices' common place, or the first GPU's when they differ (the GPU of the lowest
// device id: a job whose devices all share one GPU gets that one either way).
std::string reference_place(const config::job& job) {
  return job.cluster.places.empty() ? "cpu" : job.cluster.places.begin()->second;
}

}  // namespace

result<prepared_job> prepare_job(const std::string& path, std::int64_t steps, const std::string& place, bool outline) {
  auto j = config::load_job_file(path);
  if (!j) return j.err();
  if (!place.empty()) {
    if (auto st = model::check_place(place); !st) return st.err();
    j->cluster.places.clear();
    if (place != "cpu")
      for (const auto& d : j->cluster.cluster.devices) j->cluster.places[d.id] = place;
    j->emulate = false;
  }
  prepared_job p;
  p.job = std::move(*j);
  const auto& job = p.job;
  model::set_threads(job.threads);
  model::optimizer_config opt{job.optimizer, job.lr,       job.momentum,        job.weight_decay,
                              job.nesterov,  job.schedule, job.label_smoothing, job.clip_grad_norm,
                              job.bf16};
  const data::source& src = job.data;
  auto train = model::load_data(src, true);
  if (!train) return train.err();
  auto test = model::load_data(src, false);
  if (!test) return test.err();
  p.train_set = std::move(*train);
  p.test_set = std::move(*test);
  auto m = model::make_model(job.model, job.seed, outline);
  if (!m) return m.err();
  if (auto st = model::check_data(**m, p.train_set); !st) return st.err();
  p.model = *m;
  const double cores = job.emulate_cores > 0 ? job.emulate_cores : std::max(1u, std::thread::hardware_concurrency());
  p.cluster = job.emulate ? emulated_speeds(job.cluster.cluster, cores, p.scale) : job.cluster.cluster;
  // Many devices on few cores each get a sliver of a core: say so before the first probes,
  // which then print nothing for a long while (1,000 devices on 2 cores: 1/500 each).
  if (job.emulate && p.scale < 0.05)
    logging::get("train")->warn(
        "{} devices emulated on {:g} cores: the fastest computes at 1/{:.0f} of a core, so a step takes about {:.0f} times its "
        "compute time here (raise emulate_cores, or emulate fewer devices)",
        p.cluster.devices.size(), cores, 1 / p.scale, 1 / p.scale);
  // The planner needs this model's profile on this machine: measure it, or take the job's
  // (the same emulated hardware run after run with profile-timed devices).
  const int micro = job.cluster.planner.micro_batch > 0 ? job.cluster.planner.micro_batch : 16;
  if (!job.cluster.places.empty()) {
    if (auto st = measure_places(p, micro, opt); !st) return st.err();
  } else {
    auto profile = job.profile.empty() ? model::measure_profile(*p.model, micro, 15, opt) : config::load_profile(job.profile);
    if (!profile) return profile.err();
    if (profile->num_layers() != model::num_layers(*p.model))
      return make_error("bad_job", "profile '" + job.profile + "' has " + std::to_string(profile->num_layers()) + " layers, model '" +
                                       job.model + "' " + std::to_string(model::num_layers(*p.model)));
    p.profile = std::move(*profile);
  }
  p.reference_place = reference_place(job);
  auto& s = p.settings;
  if (job.replan_every == 0) {
    auto pl = choose_plan(job, p.cluster, p.profile);
    if (!pl) return pl.err();
    s.plan = *pl;
  } else {
    s.controller = control_settings{};
    s.controller->policy = job.policy;
    s.controller->replan_every = job.replan_every;
    auto& core = s.controller->core;
    core.profile = p.profile;
    core.cluster = p.cluster;
    core.planner = job.cluster.planner;
    core.budget = job.cluster.budget;
    core.hysteresis = job.hysteresis;
    core.regret = job.regret;
  }
  s.batch = job.cluster.planner.batch;
  const data::global_sampler sampler(p.train_set.size(), s.batch, job.seed);
  s.steps = steps > 0 ? steps : job.steps > 0 ? job.steps : static_cast<std::int64_t>(job.epochs * sampler.steps_per_epoch());
  // The run's length is known: the controller paces the cost budget over its slots.
  if (s.controller) {
    s.controller->core.budget.horizon_slots = static_cast<int>((s.steps + job.replan_every - 1) / job.replan_every);
  }
  s.seed = job.seed;
  s.optimizer = opt;
  // A cosine schedule without its own length decays over the run's steps.
  if (s.optimizer.schedule.kind == "cosine" && s.optimizer.schedule.steps == 0) {
    s.optimizer.schedule.steps = s.steps;
    if (s.optimizer.schedule.warmup_steps >= s.steps)
      return make_error("bad_job", "job '" + job.name + "': optimizer.schedule.warmup_steps must be below the run's " +
                                       std::to_string(s.steps) + " steps");
  }
  s.hash_every = job.hash_every;
  s.exact = job.exact;
  s.overlap_sums = job.cluster.planner.overlap_sums;
  // The buckets the planner prices (without overlap: one a holder set).
  s.bucket_bytes = s.overlap_sums ? static_cast<std::size_t>(job.cluster.planner.sum_bucket_bytes) : 0;
  s.dispatch_probe = job.cluster.planner.dispatch_probe;
  // The emulated cluster: the job's devices at their emulated speeds (all at this machine's
  // without emulation), moved by the job's dynamics slot by slot.
  s.emulated = job.dynamics;
  s.emulated.cluster = p.cluster;
  if (!job.emulate) {
    // Real hardware pays only real costs: devices compute at their own speed, and links and
    // sums take what they take (nothing is shaped or slept). The job's link tiers still
    // price plans for the controller (p.cluster).
    const planner::link_tier real{planner::unlimited, 0};
    auto& c = s.emulated.cluster;
    c.tiers = {real, real, real};
    c.overrides.clear();
    for (auto& d : c.devices) d.speed = 1, d.nic_bw = planner::unlimited;
    s.emulated.link_traces.clear();
  }
  s.slot_steps = job.replan_every > 0 ? job.replan_every : 10;
  s.profile = p.profile;
  s.profile_timed = job.emulate && job.emulate_compute == "profile";
  s.faults = sim::expand(job.faults, s.steps, job.seed);
  s.step_deadline_s = job.step_deadline_s;
  s.places = job.cluster.places;
  return p;
}

std::int64_t frame_cap_bytes(const planner::model_profile& m, int batch, double sample_bytes) {
  double params = 0, widest = sample_bytes;
  for (const auto& l : m.layers) {
    params += l.param_bytes;
    widest = std::max(widest, l.act_bytes);
  }
  const double largest = std::max(params, widest * std::max(batch, 1));
  const double cap = 2 * largest + double(16 << 20);
  return cap >= double(std::int64_t{1} << 30) ? std::int64_t{1} << 30 : static_cast<std::int64_t>(cap);
}

std::int64_t frame_cap_bytes(const prepared_job& p) {
  // A sample's values travel as float32, or as int64 token ids.
  const double values = double(p.train_set.channels) * p.train_set.rows * p.train_set.cols;
  return frame_cap_bytes(p.profile, p.settings.batch, values * (p.train_set.tokens ? 8 : 4));
}

}  // namespace dynapar::training
