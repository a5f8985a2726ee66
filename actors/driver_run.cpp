// The driver's run: from the first plan to the trained layers (re-plans, recoveries,
// checkpoints between steps), and the train() entry points. One step is in driver_step.cpp.
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
    for (const auto& d : s.controller->core.cluster.devices) ids.insert(d.id);
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

// The end's work: the validation set's metric (unless the last epoch's evaluation gave it)
// and what comes back of each trained layer (train_settings::final_layers).
status driver::finish_run(std::int64_t steps) {
  if (s_.test_set && !out_.test_metric) {
    auto metric = evaluate(*s_.test_set, steps - 1, "evaluating the validation set after the last step");
    if (!metric) return metric.err();
    out_.test_metric = *metric;
  }
  // The final replica check, whatever hash_every is: a replica that diverged after the last
  // periodic check is caught before the run reports its layers.
  out_.replica_hashes.clear();
  if (auto st = check_replicas(steps - 1, &out_.replica_hashes); !st) return st;
  out_.final_layers.clear();
  out_.final_hashes.clear();
  collect_layers(out_.final_layers, out_.final_hashes, s_.final_layers, timeout_, "collecting the trained layers");
  return check("collecting the trained layers");
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
  attempt_.sampler = &sampler;
  data::sample_ledger ledger(d_.size());
  const std::int64_t start = s_.resume ? s_.resume->step : 0;
  if (s_.resume) {
    if (static_cast<int>(s_.resume->num_layers()) != L_)
      return make_error("bad_checkpoint", "the checkpoint has " + std::to_string(s_.resume->num_layers()) +
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
  if (s_.resume) recovery_.cut = *s_.resume;
  recovery_.cut.step = start;
  recovery_.fresh = recovery_.cut;
  faults_.rng.seed(s_.seed ^ 0xfa17ull);
  // A kill at the first placement waits for it, which comes before the first step's faults.
  for (const auto& f : s_.faults)
    if (f.step == start && f.moment == sim::fault_moment::placement) faults_.armed.push_back(f);
  double total_time = 0, total_cost = 0;
  double steady_wait = 0, steady_time = 0;  // controller waits and step times of steady steps
  int incidents = 0;  // recoveries and retries up to the last step that ended
  std::int64_t slot = -1;
  auto last_end = clock::now();  // of the last step that ended
  // t == steps is the end: the evaluation and the trained layers, after the re-plan a device
  // lost in the last step's checks calls for (once recovered, the end is tried again).
  for (std::int64_t t = start; t <= s_.steps; ++t) {
    const bool end = t == s_.steps;
    if (end && !force_replan_ && !members_.member_died()) {
      if (auto st = finish_run(t); !st) {
        if (auto r = recover(t, false, st.err(), ledger, sampler); !r) return r.err();
        --t;  // the loop's ++t: the end again, or the steps after a rollback
        continue;
      }
      break;
    }
    // A step started with the commit of the one before (pipelined control) skips the work
    // before a step: may_start_early found nothing due. Its time runs from that step's end.
    const bool early = attempt_.early && attempt_.early->t == t;
    out_.steps_started_early += early;
    const auto t0 = early ? last_end : clock::now();
    training::step_record rec;
    rec.step = t;
    bool moved = false;      // this step's plan change moved layers
    bool replanned = false;
    if (!early) {
      bool changed = force_replan_;
      force_replan_ = false;
      if (!end && t / s_.slot_steps > slot) {  // a rollback does not enter past slots again
        slot = t / s_.slot_steps;
        if (auto st = enter_slot(slot, changed); !st) return st.err();
      }
      if (remote_departures()) changed = true;
      // A device that died between steps (unused, or after the last one) is lost before it is
      // planned again.
      drain_stale();
      if (members_.member_died()) {  // step t has not started
        if (auto st = recover(t, false, make_error("device_lost", "a device stopped between steps"), ledger, sampler); !st)
          return st.err();
        --t;  // the loop's ++t: go on at t
        continue;
      }
      if (members_.joined_count() == 0)
        if (auto st = await_devices(slot, t, changed, "no device left"); !st) return st.err();
      auto next = next_plan(t, changed);
      if (!next && actors_.controller && members_.joined_count() > 0 && out_.devices_lost > 0) {
        // Those left after a loss cannot run the model (too little memory among them):
        // replacements may come.
        if (auto st = await_devices(slot, t, changed, next.err().message); !st) return st.err();
        force_replan_ = true;
        --t;  // the loop's ++t: plan step t again
        continue;
      }
      if (!next) return next.err();
      replanned = static_cast<bool>(*next);
      if (*next) {
        const auto before = out_.layers_moved;
        if (auto st = apply(**next, t, slot, rec); !st) {
          // A device lost while layers moved: nothing was applied; plan again without it.
          if (auto r = recover(t, false, st.err(), ledger, sampler); !r) return r.err();
          --t;
          continue;
        }
        recovery_.fresh = {};
        moved = out_.layers_moved > before;
      }
      if (!current_) return make_error("bad_job", "no plan before step " + std::to_string(t));
      for (int id : members_.leaving_ids())
        for (const auto& g : current_->groups)
          if (std::count(g.devices.begin(), g.devices.end(), id))
            return make_error("device_left", "device " + std::to_string(id) + " left at slot " + std::to_string(slot) +
                                                 " but the plan in force still uses it (re-planning needs a controller)");
      retire_leavers();
      if (recovery_.since) {
        recovery_.seconds.push_back(since(*recovery_.since));
        recovery_.since.reset();
        note({t, "recovered", "", -1, "", recovery_.how + "; re-planned and migrated", recovery_.seconds.back()});
        logging::get("train")->warn("step {}: recovered in {:.3f} s ({}; re-plan and migration included)", t, recovery_.seconds.back(),
                                    recovery_.how);
      }
    }
    if (end) {  // re-planned without the lost devices: the end's work at the loop's top
      --t;
      continue;
    }
    rec.predicted_s = predicted_s_;
    rec.cost_queue = queue_;
    fire_faults(t);
    if (moved) fire_armed(sim::fault_moment::replan, t, plan_devices(), timing_.last_step_s);
    const auto samples = sampler.step_samples(t);
    control::measurement measure;
    if (auto st = run_step(t, samples, rec, measure); !st) {
      if (auto r = recover(t, attempt_.last && attempt_.last->committed(), st.err(), ledger, sampler); !r) return r.err();
      --t;
      continue;
    }
    ledger.applied(t / sampler.steps_per_epoch(), samples);
    if (const auto& p = s_.perturb; t == p.step && holders_.count(p.layer) && p.group < static_cast<int>(holders_[p.layer].size()))
      self_->send(actors_.devices.at(holders_[p.layer][p.group]), perturb_atom::value, p.layer);
    last_end = clock::now();
    rec.time_s = std::chrono::duration<double>(last_end - t0).count();
    timing_.last_step_s = rec.time_s;
    if (rec.pipeline_s > 0) timing_.last_pipeline_s = rec.pipeline_s;
    timing_.mean_step_s = timing_.mean_step_s > 0 ? 0.9 * timing_.mean_step_s + 0.1 * rec.time_s : rec.time_s;
    timing_.late_retries = 0;
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
    if (t > start && !replanned && incidents == out_.recoveries + out_.step_retries) {
      steady_wait += rec.controller_wait_s;
      steady_time += rec.time_s;
      ++out_.steady_steps;
    }
    incidents = out_.recoveries + out_.step_retries;
    for (const auto& l : measure.links) out_.data_plane_bytes[l.from] += l.bytes;
    out_.messages_per_step = 0;
    for (const auto& st : rec.stages) out_.messages_per_step += st.messages;
    if (cb_.on_step) cb_.on_step(rec);
    // Checks between steps: a device lost during one is recovered from like any other (step
    // t stands); a replica mismatch is not a crash and stops the run.
    status after = ok_status();
    if (s_.hash_every > 0 && (t + 1) % s_.hash_every == 0) after = check_replicas(t);
    if (after && s_.checkpoint_every > 0 && (t + 1) % s_.checkpoint_every == 0) after = take_checkpoint(t + 1);
    if (after && evaluates_epochs() && (t + 1) % sampler.steps_per_epoch() == 0) {
      const auto epoch = (t + 1) / sampler.steps_per_epoch();
      auto metric = evaluate(*s_.test_set, t, "evaluating the validation set");
      if (!metric) {
        after = make_error(metric.err().code, "after epoch " + std::to_string(epoch) + ", " + metric.err().message);
      } else {
        cb_.on_epoch(epoch, *metric);
        if (t + 1 == s_.steps) out_.test_metric = *metric;
      }
    }
    if (!after) {
      std::int64_t resume_at = t + 1;
      if (auto r = recover(resume_at, false, after.err(), ledger, sampler); !r) return r.err();
      t = resume_at - 1;
    }
  }
  out_.final_plan = *current_;
  out_.steps = s_.steps;
  const auto ran = s_.steps - start;  // by this run
  out_.mean_step_time_s = ran > 0 ? total_time / ran : 0;
  out_.samples_per_s = total_time > 0 ? ran * s_.batch / total_time : 0;
  out_.avg_cost = ran > 0 ? total_cost / ran : 0;
  out_.controller_wait_s = out_.steady_steps > 0 ? steady_wait / out_.steady_steps : 0;
  out_.controller_wait_share = steady_time > 0 ? steady_wait / steady_time : 0;
  for (auto& [id, j] : out_.avg_energy_j) j = ran > 0 ? j / static_cast<double>(ran) : 0;
  out_.ledger = ledger.check(sampler, s_.steps);
  for (double r : recovery_.seconds) {
    out_.mean_recovery_s += r / static_cast<double>(recovery_.seconds.size());
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
