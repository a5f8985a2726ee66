// The driver's run: from the first plan to the trained layers (re-plans, recoveries,
// checkpoints between steps), and the train() entry points. One step is in driver_step.cpp.
#include "actors/driver.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
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

control::run_cadence driver::start_run(data::sample_ledger& ledger, data::global_sampler& sampler) {
  if (s_.controller && !actors_.controller) actors_.controller = spawn_controller(sys_, *s_.controller);
  replan_every_ = s_.controller ? s_.controller->replan_every : s_.slot_steps;
  bench_ref_s_ = model::benchmark_work();
  for (int k = 0; k < 2; ++k) bench_ref_s_ = std::min(bench_ref_s_, model::benchmark_work());
  const std::int64_t start = s_.resume ? s_.resume->step : 0;
  // Steps before the checkpoint were applied by the run that wrote it.
  for (std::int64_t t = 0; t < start; ++t) ledger.applied(t / sampler.steps_per_epoch(), sampler.step_samples(t));
  first_slot_ = start / s_.slot_steps;
  out_.resumed_from = start;
  // The first rollback point: the start (fresh layers, or the resumed checkpoint's).
  if (s_.resume) recovery_.cut = *s_.resume;
  recovery_.cut.step = start;
  recovery_.fresh = recovery_.cut;
  faults_ = sim::fault_schedule(s_.faults, start, s_.seed ^ 0xfa17ull);
  control::run_cadence c;
  c.start = start;
  c.steps = s_.steps;
  c.slot_steps = s_.slot_steps;
  c.controller = static_cast<bool>(actors_.controller);
  c.replan_every = replan_every_;
  for (const auto& [step, p] : s_.replans) c.replan_steps.insert(step);
  c.hash_every = s_.hash_every;
  c.checkpoint_every = s_.checkpoint_every;
  c.epoch_steps = cb_.on_epoch && s_.test_set ? sampler.steps_per_epoch() : 0;
  c.perturb_step = s_.perturb.step;
  c.pipelined = s_.pipelined_control;
  return c;
}

control::run_facts driver::facts(std::int64_t next) const {
  control::run_facts f;
  f.member_died = members_.member_died();
  f.members_move = !members_.leaving_ids().empty();
  // A node that asked to leave, or went silent, is seen before the next step starts.
  if (actors_.remote)
    for (int id : members_.joined_ids()) f.members_move = f.members_move || actors_.remote->lost(id) || !actors_.remote->present(id);
  // A kill waiting for an early start does not hold one back: it would never land.
  f.faults_due = faults_.pending(next) || cluster_.slow_down_over(next);
  f.recovering = recovery_.since.has_value();
  return f;
}

// The run: a pump of its loop (control/run_loop.hpp), each command carried out here.
result<training::train_outcome> driver::run() {
  if (auto st = training::check_run(s_, d_.size(), L_); !st) return st.err();
  data::global_sampler sampler(d_.size(), s_.batch, s_.seed);
  data::sample_ledger ledger(d_.size());
  auto& loop = loop_.emplace(start_run(ledger, sampler));
  attempt_.sampler = &sampler;
  run_totals totals;
  training::step_record rec;
  std::optional<control::decision> decided;
  error why;  // the failure the next recovery answers
  const auto after = [&](const status& st) {  // a duty done, or a failure to recover from
    if (!st) why = st.err();
    st ? loop.done() : loop.failed();
  };
  using duty = control::run_duty;
  for (auto c = loop.next(members_.member_died()); c.what != duty::stop; c = loop.next(members_.member_died())) {
    if (c.opens) totals.open(c, rec);
    bool changed = false;
    switch (c.what) {
      case duty::enter_slot:
        if (auto st = enter_slot(c.slot, changed); !st) return st.err();
        loop.slot_entered(changed);
        break;
      case duty::gather:  // a device that died between steps is lost before it is planned again
        changed = remote_departures();
        drain_stale();
        why = make_error("device_lost", "a device stopped between steps");
        loop.gathered(changed, members_.member_died(), members_.joined_count() == 0);
        break;
      case duty::await_devices:
        if (auto st = await_devices(c.slot, c.step, changed, members_.joined_count() ? why.message : "no device left"); !st) return st.err();
        loop.awaited(changed);
        break;
      case duty::plan: {
        auto next = next_plan(c.step, c.replan);
        // No plan holds the model on those left after a loss (too little memory among them):
        // replacements may come.
        if (!next && !(actors_.controller && members_.joined_count() > 0 && out_.devices_lost > 0)) return next.err();
        if (!next) why = next.err();  // infeasible: wait for devices, then plan again
        decided = next ? std::move(*next) : std::nullopt;
        totals.replanned = decided.has_value();
        next ? loop.planned(totals.replanned) : loop.infeasible();
        break;
      }
      case duty::apply: {
        const auto before = out_.layers_moved;
        const auto st = apply(*decided, c.step, c.slot, rec);  // failed: nothing was applied
        if (st) recovery_.fresh = {};
        st ? loop.applied(out_.layers_moved > before) : after(st);
        break;
      }
      case duty::retire:
        if (auto st = retire(c.step, c.slot); !st) return st.err();
        loop.retired();
        break;
      case duty::step: {
        const auto st = step_once(c, rec, totals, sampler, ledger);
        if (!st) why = st.err();
        st ? loop.committed(attempt_.early.has_value()) : loop.step_failed(attempt_.last && attempt_.last->committed());
        break;
      }
      case duty::perturb: after(perturb()); break;
      // Checks between steps: a device lost during one is recovered from like any other (step
      // t stands); a replica mismatch is not a crash and stops the run.
      case duty::check_replicas: after(check_replicas(c.step)); break;
      case duty::checkpoint: after(take_checkpoint(c.step + 1)); break;
      case duty::evaluate: after(evaluate_epoch(c.step, sampler)); break;
      case duty::finish: after(finish_run(c.step)); break;
      case duty::recover: {
        auto r = recover(c.step, c.committed, why, ledger, sampler);
        if (!r) return r.err();
        loop.recovered(r->step, r->replans);
        break;
      }
      case duty::stop: break;
    }
  }
  return outcome(totals, ledger, sampler);
}

// Step c.step: the faults due, one attempt, and on its commit the step's figures.
status driver::step_once(const control::run_command& c, training::step_record& rec, run_totals& totals, data::global_sampler& sampler,
                         data::sample_ledger& ledger) {
  const auto t = c.step;
  out_.steps_started_early += c.early;
  rec.predicted_s = predicted_s_;
  rec.cost_queue = queue_;
  fire_faults(t);
  if (c.moved) fire_armed(sim::fault_moment::replan, t, plan_devices(), timing_.last_step_s);
  const auto samples = sampler.step_samples(t);
  control::measurement measure;
  if (auto st = run_step(t, samples, rec, measure); !st) return st;
  ledger.applied(t / sampler.steps_per_epoch(), samples);
  totals.last_end = clock::now();
  rec.time_s = std::chrono::duration<double>(totals.last_end - totals.opened).count();
  timing_.last_step_s = rec.time_s;
  if (rec.pipeline_s > 0) timing_.last_pipeline_s = rec.pipeline_s;
  timing_.mean_step_s = timing_.mean_step_s > 0 ? 0.9 * timing_.mean_step_s + 0.1 * rec.time_s : rec.time_s;
  timing_.late_retries = 0;
  measure.time_s = rec.time_s;
  control::price(measure, [&](int id) { return cluster_.price_per_s(id); }, [&](int id) { return cluster_.power_w(id); });
  rec.cost = measure.cost;
  if (actors_.controller) self_->send(actors_.controller, report_atom::value, measure);
  totals.tally.committed(rec, measure, totals.replanned, out_.recoveries + out_.step_retries, out_);
  if (cb_.on_step) cb_.on_step(rec);
  return ok_status();
}

status driver::evaluate_epoch(std::int64_t t, const data::global_sampler& sampler) {
  const auto epoch = (t + 1) / sampler.steps_per_epoch();
  auto metric = evaluate(*s_.test_set, t, "evaluating the validation set");
  if (!metric) return make_error(metric.err().code, "after epoch " + std::to_string(epoch) + ", " + metric.err().message);
  cb_.on_epoch(epoch, *metric);
  if (t + 1 == s_.steps) out_.test_metric = *metric;
  return ok_status();
}

training::train_outcome driver::outcome(const run_totals& totals, const data::sample_ledger& ledger, data::global_sampler& sampler) {
  for (const auto& f : faults_.armed()) {  // a moment that never came: say so, not count it
    logging::get("train")->warn("a {} planned at step {} waited for the next {}, which never came", sim::name(f.kind), f.step,
                                sim::name(f.moment));
    note({s_.steps, "missed", sim::name(f.kind), f.device, "plan", std::string("no ") + sim::name(f.moment) + " came", 0});
  }
  out_.final_plan = *current_;
  out_.steps = s_.steps;
  totals.tally.finish(s_.batch, recovery_.seconds, out_);
  out_.ledger = ledger.check(sampler, s_.steps);
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
