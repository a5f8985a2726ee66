// The driver's step loop: one attempt at a step (pipelines, the exact gradient sum, the
// updates), the run from the first plan to the trained layers, and the train() entry points.
#include "actors/driver.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "actors/controller_actor.hpp"
#include "actors/device_actor.hpp"
#include "actors/group_supervisor.hpp"
#include "actors/messages.hpp"
#include "actors/session.hpp"
#include "data/sampler.hpp"
#include "schedule/dispatch.hpp"
#include "logging/logging.hpp"
#include "planner/policy.hpp"

namespace dynapar::actors {
namespace detail {

// Without an emulated cluster: every device the plans or the caller name, at full speed, on
// one node.
sim::scenario default_emulation(const training::train_settings& s, const cluster_actors& a) {
  sim::scenario e;
  std::set<int> ids;
  auto add = [&](const planner::plan& p) {
    for (const auto& g : p.groups) ids.insert(g.devices.begin(), g.devices.end());
  };
  add(s.plan);
  for (const auto& [t, p] : s.replans) add(p);
  for (const auto& [id, actor] : a.devices) ids.insert(id);
  if (s.controller)
    for (const auto& d : s.controller->cluster.devices) ids.insert(d.id);
  for (int id : ids) {
    planner::device_spec d;
    d.id = id;
    d.node = 0;
    e.cluster.devices.push_back(d);
  }
  return e;
}

bool policy_dispatches(const training::train_settings& s) {
  if (!s.controller) return true;
  if (s.controller->custom) return s.controller->custom->dispatches();
  const auto p = planner::make_policy(s.controller->policy);
  return p && (*p)->dispatches();
}

peer_options peer_options_of(const model::model_chain& m, const training::train_settings& s) {
  peer_options o;
  o.gloo_store = s.gloo_store;
  o.at_start = true;
  o.bucket_bytes = s.bucket_bytes;
  for (int l = 0; l < model::num_layers(m); ++l) o.layer_bytes.push_back(model::param_bytes(m, l));
  return o;
}

driver::probe_layout driver::probe_plan() const {
  probe_layout out;
  out.samples.assign(current_->groups.size(), 0);
  // The devices' interim reports and the rest's task are not on the wire to node processes.
  if (!dispatches_ || actors_.remote) return out;
  // Exact: the pool's units are whole micro-batches, so that every sample keeps its leaf.
  for (const auto& gp : current_->groups)
    if (s_.exact && gp.devices.size() == 1) out.unit = std::max(out.unit, gp.micro_batch);
  std::vector<int> eligible;  // single-device groups' shares (exact: of whole units)
  for (const auto& gp : current_->groups)
    eligible.push_back(gp.devices.size() == 1 && (!s_.exact || gp.micro_batch == out.unit) ? gp.share : 0);
  out.samples = schedule::probes(eligible, s_.dispatch_probe, out.unit);
  if (s_.profile) {
    const int L = s_.profile->num_layers();
    const planner::profile_sums sums(*s_.profile);
    if (sums.fwd(0, L) > 0) out.work_over_fwd = sums.work(0, L) / sums.fwd(0, L);
  }
  return out;
}

status driver::run_step(std::int64_t t, const std::vector<int>& samples, training::step_record& rec, control::measurement& measure) {
  ++tag_;
  committed_ = false;
  // Every group gets a contiguous slice of the step's samples, cut into micro-batches
  // numbered in sample order (the exact sum's leaves). With within-step dispatch, single-device
  // groups first take their probes, the other groups their shares, and the rest of the
  // samples is a pool handed out when the first probe ends.
  const auto probes = probe_plan();
  const std::size_t G = groups_.size();
  // The step's clock starts before its first task goes out: a device's pace is judged by the
  // time since its own task went out (`started_s`), which on a busy machine may be well after.
  const auto started = clock::now(), deadline = started + step_deadline();
  std::vector<schedule::probe_progress> progress(G);
  std::int64_t micro_batches = 0;  // of the step, over all groups
  int cursor = 0;
  auto task_for = [&](std::size_t g, int lo, int hi, std::int64_t first_micro) {
    const auto& gp = current_->groups[g];
    group_task task;
    task.step = tag_;
    task.train_step = t;
    task.first_micro = first_micro;
    task.accumulate = !s_.exact;
    task.report_to = caf::actor_cast<group_sink>(self_);  // the driver receives group_report
    for (std::size_t j = 0; j + 1 < gp.devices.size(); ++j) task.links.push_back(link(gp.devices[j], gp.devices[j + 1]));
    for (int a = lo; a < hi; a += gp.micro_batch) {
      const int b = std::min(hi, a + gp.micro_batch);
      task.inputs.push_back(model::inputs(d_, samples, a, b));
      task.targets.push_back(model::targets(d_, samples, a, b));
      task.samples.emplace_back(samples.begin() + a, samples.begin() + b);
    }
    return task;
  };
  auto start = [&](std::size_t g, int lo, int hi, bool more) {
    auto task = task_for(g, lo, hi, micro_batches);
    micro_batches += static_cast<std::int64_t>(task.inputs.size());
    task.more = more;
    progress[g].started_s = since(started);
    self_->send(groups_[g], step_atom::value, std::move(task));
  };
  for (std::size_t g = 0; g < G; ++g)
    if (probes.samples[g] > 0) {
      start(g, cursor, cursor + probes.samples[g], true);
      cursor += probes.samples[g];
    }
  for (std::size_t g = 0; g < G; ++g)
    if (probes.samples[g] == 0) {
      start(g, cursor, cursor + current_->groups[g].share, false);
      cursor += current_->groups[g].share;
    }
  const int pool = s_.batch - cursor, pool_at = cursor;
  const std::int64_t pool_micro = micro_batches;
  if (pool > 0) micro_batches += (pool + probes.unit - 1) / probes.unit;  // exact: the pool's units are micro-batches
  for (std::size_t g = 0; g < G; ++g) {
    progress[g].prior_s = paces_.prior(current_->groups[g].devices[0]);
    progress[g].samples = probes.samples[g];
    progress[g].first_samples = std::min(probes.samples[g], current_->groups[g].micro_batch);
  }
  std::vector<int> rest(G, -1);  // samples of the pool by group, once dispatched
  auto taker = [&](int device) -> int {  // the probing group of a device (-1: none)
    for (std::size_t g = 0; g < G; ++g)
      if (probes.samples[g] > 0 && current_->groups[g].devices[0] == device) return static_cast<int>(g);
    return -1;
  };
  // A probe's rest goes out at once; a device still running its probe keeps it until then.
  auto send_rest = [&](std::size_t g) {
    int lo = pool_at;
    for (std::size_t h = 0; h < g; ++h) lo += std::max(0, rest[h]);
    auto task = task_for(g, lo, lo + rest[g], pool_micro + (lo - pool_at) / probes.unit);
    task.resume = true;
    self_->send(groups_[g], step_atom::value, std::move(task));
  };
  auto dispatch = [&](double now) {
    std::vector<std::size_t> takers;
    std::vector<schedule::prospect> prospects;
    for (std::size_t g = 0; g < G; ++g)
      if (probes.samples[g] > 0) {
        takers.push_back(g);
        prospects.push_back(schedule::prospect_of(progress[g], now, probes.work_over_fwd, paces_.trust()));
      }
    const auto given = schedule::dispatch_samples(prospects, pool, probes.unit);
    for (std::size_t k = 0; k < takers.size(); ++k) rest[takers[k]] = given[k];
    for (std::size_t g : takers) send_rest(g);
  };
  // Each layer: every holder's partial sums, added in the exact sum's fixed tree over the
  // step's micro-batches (in the order of the step's samples), by the holders themselves or
  // here (actors/reduction.hpp), divided by B and applied on every holder. A device's sums
  // start when its stage reports (overlapped with the other stages' backward), or when every
  // group has (overlap_sums off).
  auto work = reduction_->start({tag_, micro_batches, &holders_, comm_generation_});
  double loss_sum = 0, pipelines_s = 0;
  std::vector<std::pair<int, double>> compute_s;  // by device
  std::map<int, double> ready_s;                  // by device: its stage's report, from the start
  auto on_down = [&](caf::down_msg& d) { note_down(d); };
  for (std::size_t k = 0; (k < groups_.size() || !work->done()) && failure_.empty();)
    self_->receive(
        on_down,
        [&](const stage_report& r) {
          if (r.step != tag_ || !r.error.empty()) return;  // an abandoned attempt's; an error comes with its group's
          if (r.interim != 0) {  // a probe's progress (within-step dispatch)
            const int g = taker(r.device);
            if (g < 0) return;
            if (r.interim == 1) progress[g].forward_s = r.compute_s;
            if (r.interim != 2) return;
            progress[g].done_s = since(started);
            progress[g].compute_s = r.compute_s;
            if (rest[g] < 0) dispatch(progress[g].done_s);
            return;
          }
          ready_s[r.device] = since(started);
          if (s_.overlap_sums) work->ready(r.device);
          if (!armed_.empty() && ready_s.size() == plan_devices().size())  // every sum under way
            fire_armed(sim::fault_moment::sum, t, plan_devices(), 0.002);
        },
        [&](const group_report& r) {
          if (r.step != tag_) return;  // an abandoned attempt's
          if (!r.error.empty()) failure_ = r.error;
          loss_sum += r.loss_sum;
          rec.pipeline_s = std::max(rec.pipeline_s, r.time_s);
          for (const auto& st : r.stages) {
            rec.stages.push_back({st.device, st.compute_s, st.wait_s, st.messages});
            compute_s.emplace_back(st.device, st.compute_s);
            measure.links.insert(measure.links.end(), st.links.begin(), st.links.end());
          }
          if (++k < groups_.size()) return;
          pipelines_s = since(started);
          if (!s_.overlap_sums)
            for (const auto& [id, at] : ready_s) work->ready(id);
        },
        [&](device_gradients& g) { work->on(g); },
        [&](const sum_held& h) {
          if (h.step == tag_) out_.sum_received_bytes[h.device] += static_cast<double>(h.bytes_in);
          work->on(h);
        },
        [&](caf::error& e) { failure_ = text(e); },
        caf::after(slice(deadline)) >> [&] { tick(started, deadline, k < groups_.size() ? "the pipelines" : "adding gradients"); });
  if (auto st = check("step " + std::to_string(t)); !st) return st;
  measure.stages = control::stages_of(*current_, compute_s);
  for (auto& st : measure.stages)  // dispatched: what each probe's device ran in all
    if (const int g = taker(st.device); g >= 0) {
      const int u = current_->groups[g].micro_batch;
      st.samples = probes.samples[g] + rest[g];
      st.micro_batches = (probes.samples[g] + u - 1) / u + (rest[g] + u - 1) / u;
    }
  for (auto& st : rec.stages)
    for (const auto& ms : measure.stages)
      if (ms.device == st.device) st.samples = static_cast<int>(ms.samples);
  // What the probes and the priors foretold of the rests, for the next steps' trust.
  for (const auto& [id, c] : compute_s)
    if (const int g = taker(id); g >= 0 && rest[g] > 0 && c > progress[g].compute_s)
      paces_.observe(id, progress[g].compute_s / probes.samples[g], (c - progress[g].compute_s) / rest[g]);
  if (auto st = work->finish(); !st) return make_error(st.err().code, "step " + std::to_string(t) + ", " + st.err().message);
  if (sync_stale_) {
    // The sums run in this process or among the holders' nodes; on the emulated cluster they
    // would be rings over its links, a bucket's starting when its holders' backward has
    // passed it: the time they would take beyond what ran here is slept.
    sums_ = s_.profile ? cluster_.sums(*s_.profile, s_.batch, *current_, s_.overlap_sums) : std::vector<planner::sum_segment>{};
    sync_stale_ = false;
  }
  std::vector<std::vector<double>> ready;  // by group and stage
  for (const auto& gp : current_->groups) {
    ready.emplace_back();
    for (int id : gp.devices) ready.back().push_back(ready_s[id]);
  }
  const double sums_end_s = s_.overlap_sums ? planner::sums_end(sums_, ready) : pipelines_s + planner::sums_end(sums_, {});
  rec.sync_s = std::max(0.0, sums_end_s - pipelines_s);  // what the pipelines did not hide
  const double sleep_s = sums_end_s - since(started);
  if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  // After the sums, every holder's optimizer step (at its emulated speed). From here every
  // live holder applies this step: a failure now leaves the survivors one step further
  // (recover() knows, from committed_).
  const auto update_started = clock::now();
  committed_ = true;
  confirmed_.begin(tag_, work->buckets());
  const int acks = work->apply(static_cast<double>(s_.batch));
  for (int k = 0; k < acks && failure_.empty();)
    self_->receive(on_down, [&](const applied& a) { k += confirmed_.confirm(a.device, a.step, a.layer); },
                   [&](caf::error& e) { failure_ = text(e); }, caf::after(slice(deadline)) >> [&] { tick(started, deadline, "applying gradients"); });
  if (auto st = check("step " + std::to_string(t)); !st) return st;
  // The ledger counts what the devices confirmed: every holder of every layer.
  if (const auto missing = unconfirmed(); !missing.empty())
    return make_error("unconfirmed", "step " + std::to_string(t) + ": device " + std::to_string(*missing.begin()) +
                                         " did not confirm applying its layers");
  rec.update_s = since(update_started);
  rec.loss = loss_sum / s_.batch;
  return ok_status();
}

result<training::train_outcome> driver::run() {
  if (d_.size() < s_.batch) return make_error("bad_job", "the data set has fewer samples than one batch");
  if (s_.slot_steps < 1) return make_error("bad_job", "slot_steps must be >= 1");
  for (const auto& [step, p] : s_.replans)
    if (auto v = planner::validate(p, L_, s_.batch); !v)
      return make_error(v.err().code, "re-plan before step " + std::to_string(step) + ": " + v.err().message);
  if (s_.controller && !actors_.controller) actors_.controller = spawn_controller(sys_, *s_.controller);
  replan_every_ = s_.controller ? s_.controller->replan_every : s_.slot_steps;
  if (replan_every_ < 1) return make_error("bad_job", "replan_every must be >= 1");
  if (s_.profile_timed && !s_.profile) return make_error("bad_job", "profile-timed emulation needs the model's profile");
  bench_ref_s_ = model::benchmark_work();
  for (int k = 0; k < 2; ++k) bench_ref_s_ = std::min(bench_ref_s_, model::benchmark_work());

  data::global_sampler sampler(d_.size(), s_.batch, s_.seed);
  data::sample_ledger ledger(d_.size());
  const std::int64_t start = s_.resume ? s_.resume->step : 0;
  if (s_.resume) {
    if (static_cast<int>(s_.resume->layers.size()) != L_)
      return make_error("bad_checkpoint", "the checkpoint has " + std::to_string(s_.resume->layers.size()) +
                                              " layers, the model " + std::to_string(L_));
    if (start < 0 || start > s_.steps)
      return make_error("bad_checkpoint", "the checkpoint is at step " + std::to_string(start) + ", the job has " +
                                              std::to_string(s_.steps) + " steps");
    // Steps before the checkpoint were applied by the run that wrote it.
    for (std::int64_t t = 0; t < start; ++t) ledger.applied(t / sampler.steps_per_epoch(), sampler.step_samples(t));
  }
  first_slot_ = start / s_.slot_steps;
  out_.resumed_from = start;
  // The first rollback point: the start (fresh layers, or the resumed checkpoint's).
  cut_.step = start;
  if (s_.resume) cut_.layers = s_.resume->layers;
  fresh_ = cut_.layers;
  fault_rng_.seed(s_.seed ^ 0xfa17ull);
  double total_time = 0, total_cost = 0;
  std::int64_t slot = -1;
  for (std::int64_t t = start; t < s_.steps; ++t) {
    const auto t0 = clock::now();
    training::step_record rec;
    rec.step = t;
    bool changed = force_replan_;
    force_replan_ = false;
    if (t / s_.slot_steps > slot) {  // a rollback does not enter past slots again
      slot = t / s_.slot_steps;
      if (auto st = enter_slot(slot, changed); !st) return st.err();
    }
    if (remote_departures()) changed = true;
    // A device that died between steps (unused, or after the last one) is lost before it is
    // planned again.
    drain_stale();
    bool died = false;
    for (int id : dead_) died = died || joined_.count(id) || leaving_.count(id);
    if (died) {  // step t has not started
      if (auto st = recover(t, false, make_error("device_lost", "a device stopped between steps"), ledger, sampler); !st)
        return st.err();
      --t;  // the loop's ++t: go on at t
      continue;
    }
    if (joined_.empty())
      if (auto st = await_devices(slot, t, changed, "no device left"); !st) return st.err();
    auto next = next_plan(t, changed);
    if (!next && actors_.controller && !joined_.empty() && out_.devices_lost > 0) {
      // Those left after a loss cannot run the model (too little memory among them):
      // replacements may come.
      if (auto st = await_devices(slot, t, changed, next.err().message); !st) return st.err();
      force_replan_ = true;
      --t;  // the loop's ++t: plan step t again
      continue;
    }
    if (!next) return next.err();
    bool moved = false;  // this step's plan change moved layers
    if (*next) {
      const auto before = out_.layers_moved;
      if (auto st = apply(**next, t, slot, rec); !st) {
        // A device lost while layers moved: nothing was applied; plan again without it.
        if (auto r = recover(t, false, st.err(), ledger, sampler); !r) return r.err();
        --t;
        continue;
      }
      fresh_.clear();
      moved = out_.layers_moved > before;
    }
    if (!current_) return make_error("bad_job", "no plan before step " + std::to_string(t));
    rec.predicted_s = predicted_s_;
    rec.cost_queue = queue_;
    for (int id : leaving_)
      for (const auto& g : current_->groups)
        if (std::count(g.devices.begin(), g.devices.end(), id))
          return make_error("device_left", "device " + std::to_string(id) + " left at slot " + std::to_string(slot) +
                                               " but the plan in force still uses it (re-planning needs a controller)");
    retire_leavers();
    if (recovering_) {
      recovery_s_.push_back(since(*recovering_));
      recovering_.reset();
      note({t, "recovered", "", -1, "", recovery_how_ + "; re-planned and migrated", recovery_s_.back()});
      logging::get("train")->warn("step {}: recovered in {:.3f} s ({}; re-plan and migration included)", t, recovery_s_.back(),
                                  recovery_how_);
    }
    fire_faults(t);
    if (moved) fire_armed(sim::fault_moment::replan, t, plan_devices(), last_step_s_);
    const auto samples = sampler.step_samples(t);
    control::measurement measure;
    if (auto st = run_step(t, samples, rec, measure); !st) {
      if (auto r = recover(t, committed_, st.err(), ledger, sampler); !r) return r.err();
      --t;
      continue;
    }
    ledger.applied(t / sampler.steps_per_epoch(), samples);
    if (t == s_.perturb_step && holders_.count(s_.perturb_layer) &&
        s_.perturb_group < static_cast<int>(holders_[s_.perturb_layer].size()))
      self_->send(actors_.devices.at(holders_[s_.perturb_layer][s_.perturb_group]), perturb_atom::value, s_.perturb_layer);
    rec.time_s = since(t0);
    last_step_s_ = rec.time_s;
    if (rec.pipeline_s > 0) last_pipeline_s_ = rec.pipeline_s;
    mean_step_s_ = mean_step_s_ > 0 ? 0.9 * mean_step_s_ + 0.1 * rec.time_s : rec.time_s;
    late_retries_ = 0;
    rec.cost = cluster_.price_per_s(*current_) * rec.time_s;
    for (const auto& st : measure.stages)
      if (cluster_.index_of(st.device) >= 0) {
        measure.energy_j.emplace_back(st.device, cluster_.power_w(st.device) * st.compute_s);
        out_.avg_energy_j[st.device] += measure.energy_j.back().second;
      }
    if (actors_.controller) {
      measure.time_s = rec.time_s;
      measure.cost = rec.cost;
      self_->send(actors_.controller, report_atom::value, measure);
    }
    total_time += rec.time_s;
    total_cost += rec.cost;
    for (const auto& l : measure.links) out_.data_plane_bytes[l.from] += l.bytes;
    out_.messages_per_step = 0;
    for (const auto& st : rec.stages) out_.messages_per_step += st.messages;
    if (cb_.on_step) cb_.on_step(rec);
    // Checks between steps: a device lost during one is recovered from like any other (step
    // t stands); a replica mismatch is not a crash and stops the run.
    status after = ok_status();
    if (s_.hash_every > 0 && (t + 1) % s_.hash_every == 0) after = check_replicas(t);
    if (after && s_.checkpoint_every > 0 && (t + 1) % s_.checkpoint_every == 0) after = take_checkpoint(t + 1);
    if (after && cb_.on_epoch && (t + 1) % sampler.steps_per_epoch() == 0) {
      std::vector<model::layer_copy> layers;
      request_layers(layers);
      after = check("collecting the layers after epoch " + std::to_string((t + 1) / sampler.steps_per_epoch()));
      if (after) cb_.on_epoch((t + 1) / sampler.steps_per_epoch(), layers);
    }
    if (!after) {
      std::int64_t resume_at = t + 1;
      if (auto r = recover(resume_at, false, after.err(), ledger, sampler); !r) return r.err();
      t = resume_at - 1;
    }
  }
  request_layers(out_.final_layers);
  if (auto st = check("collecting the trained layers"); !st) return st.err();
  out_.final_plan = *current_;
  out_.steps = s_.steps;
  const auto ran = s_.steps - start;  // by this run
  out_.mean_step_time_s = ran > 0 ? total_time / ran : 0;
  out_.samples_per_s = total_time > 0 ? ran * s_.batch / total_time : 0;
  out_.avg_cost = ran > 0 ? total_cost / ran : 0;
  for (auto& [id, j] : out_.avg_energy_j) j = ran > 0 ? j / static_cast<double>(ran) : 0;
  out_.ledger = ledger.check(sampler, s_.steps);
  for (double r : recovery_s_) {
    out_.mean_recovery_s += r / static_cast<double>(recovery_s_.size());
    out_.max_recovery_s = std::max(out_.max_recovery_s, r);
  }
  return out_;
}

}  // namespace detail

result<training::train_outcome> train(caf::actor_system& sys, cluster_actors& actors, const model::model_chain& m,
                                      const data::dataset& train_data, const training::train_settings& s,
                                      const training::train_callbacks& callbacks) {
  detail::driver d(sys, actors, m, train_data, s, callbacks);
  return d.run();
}

result<training::train_outcome> train(const model::model_chain& m, const data::dataset& d, const training::train_settings& s,
                                      const training::train_callbacks& callbacks) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(std::max(1, s.scheduler_threads)));
  // Work stealing polls for work, and on few cores its spinning takes time from the device
  // threads (which are detached and do not use the scheduler); a shared queue sleeps instead.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  cluster_actors actors;
  return train(sys, actors, m, d, s, callbacks);
}

}  // namespace dynapar::actors
