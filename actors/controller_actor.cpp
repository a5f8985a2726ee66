#include "actors/controller_actor.hpp"

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "actors/messages.hpp"
#include "common/rng.hpp"
#include "logging/logging.hpp"
#include "planner/evaluate.hpp"
#include "planner/hysteresis.hpp"
#include "planner/lyapunov.hpp"
#include "planner/policy.hpp"
#include "sim/estimator.hpp"

namespace dynapar::actors {
namespace {

struct controller_state {
  controller_config cfg;
  std::shared_ptr<planner::policy> policy;
  std::unique_ptr<planner::virtual_queues> queues;
  std::unique_ptr<sim::estimator> estimates;
  std::optional<planner::plan> current;
  std::vector<std::string> events;         // since the last decision
  std::vector<double> decided_speeds;      // estimates at the last decision
  double slot_cost = 0;                    // summed over the slot's steps so far
  std::map<int, double> slot_energy;       // joules by device, summed likewise
  int slot_steps = 0;
  rng noise{1};  // the estimator's noise hook; measurements here are real, so noise is 0
  // Measured step time / predicted, of steps without migration: its mean and mean relative
  // deviation (the predictions' noise, which hysteresis must not chase).
  double steady_pred = 0, ratio_mean = 0, ratio_dev = 0;
  int ratio_n = 0;
  bool first_step = true;  // of the plan in force: it carries the migration
  int kept = 0;            // proposed changes hysteresis turned down
  static inline const char* name = "controller";
};

// Per-stage compute times and link counters of one step under the plan in force.
sim::step_outcome as_outcome(const planner::plan& p, const step_measure& m) {
  sim::step_outcome out;
  for (const auto& g : p.groups)
    for (std::size_t j = 0; j < g.devices.size(); ++j) {
      sim::stage_measure st;
      st.device = g.devices[j];
      st.first_layer = g.splits[j];
      st.end_layer = g.splits[j + 1];
      st.samples = g.share;
      st.micro_batches = (g.share + g.micro_batch - 1) / g.micro_batch;
      for (const auto& [id, s] : m.compute_s)
        if (id == st.device) st.compute_s = s;
      out.stages.push_back(st);
    }
  for (const auto& l : m.links) out.links.push_back({l.from, l.to, l.bytes, l.busy_s, l.transfers});
  return out;
}

void set_available(controller_state& st, int id, bool on) {
  for (auto& d : st.cfg.cluster.devices)
    if (d.id == id && d.available != on) {
      d.available = on;
      st.events.push_back("device " + std::to_string(id) + (on ? " joined" : " leaves"));
    }
}

// Why this plan: what changed since the last decision, then the planner's own account.
std::string explain(controller_state& st, const planner::problem& p, const planner::plan& next) {
  std::ostringstream os;
  for (const auto& e : st.events) os << e << "; ";
  for (std::size_t i = 0; i < p.cluster.devices.size() && i < st.decided_speeds.size(); ++i) {
    const double was = st.decided_speeds[i], now = p.cluster.devices[i].speed;
    if (was > 0 && p.cluster.devices[i].available && std::abs(now - was) > 0.15 * was)
      os << "device " << p.cluster.devices[i].id << " measured at speed " << now << " (was " << was << "); ";
  }
  const auto q = st.queues->state();
  if (st.current)
    if (auto old = planner::evaluate(p, *st.current, nullptr, q))
      os << "old plan now predicted " << old->batch_time_s * 1e3 << " ms; ";
  if (auto r = planner::evaluate(p, next, st.current ? &*st.current : nullptr, q)) {
    os << "new plan " << r->batch_time_s * 1e3 << " ms (compute " << r->compute_s * 1e3 << ", sums " << r->sync_s * 1e3
       << ", updates " << r->update_s * 1e3 << ", migration " << r->migration_s * 1e3 << ")";
    for (const auto& g : r->groups)
      if (g.time_s == r->compute_s) os << ", bottleneck " << g.bottleneck;
    if (st.cfg.budget.has_cost()) os << ", cost queue " << q.cost << " budgets";
  }
  return os.str();
}

caf::behavior controller(caf::stateful_actor<controller_state>* self, controller_config cfg) {
  auto& s = self->state;
  s.cfg = std::move(cfg);
  for (auto& d : s.cfg.cluster.devices) {
    d.speed = 1;  // unknown until the device joins with its benchmark
    d.available = false;
  }
  if (s.cfg.custom) {
    s.policy = s.cfg.custom;
  } else if (auto p = planner::make_policy(s.cfg.policy)) {
    s.policy = std::move(*p);
  }
  s.queues = std::make_unique<planner::virtual_queues>(s.cfg.budget);
  s.estimates = std::make_unique<sim::estimator>(s.cfg.cluster, s.cfg.profile, s.cfg.smoothing);
  if (s.cfg.restore) {
    s.queues->restore(s.cfg.restore->queues);
    s.estimates->restore(s.cfg.restore->estimates);
  }
  return {
      [=](snapshot_atom) {
        return controller_snapshot{self->state.queues->state(), self->state.estimates->snapshot()};
      },
      [=](join_atom, int id, double measured_speed) {
        set_available(self->state, id, true);
        self->state.estimates->announce(id, measured_speed);
      },
      [=](leave_atom, int id) { set_available(self->state, id, false); },
      // What a step really took: learn speeds and links; its cost counts towards the slot.
      [=](report_atom, const step_measure& m) {
        auto& st = self->state;
        if (!st.current) return;
        planner::problem nominal(st.cfg.profile, st.cfg.cluster, st.cfg.planner, st.cfg.budget);
        st.estimates->observe(as_outcome(*st.current, m), nominal, 0.0, st.noise);
        st.slot_cost += m.cost;
        for (const auto& [id, j] : m.energy_j) st.slot_energy[id] += j;
        ++st.slot_steps;
        if (!st.first_step && st.steady_pred > 0 && m.time_s > 0) {
          const double r = m.time_s / st.steady_pred;
          if (st.ratio_n++ == 0) st.ratio_mean = r;
          st.ratio_mean = 0.9 * st.ratio_mean + 0.1 * r;
          st.ratio_dev = 0.9 * st.ratio_dev + 0.1 * std::abs(r - st.ratio_mean) / st.ratio_mean;
        }
        st.first_step = false;
      },
      // The next slot's plan, from what has been measured so far.
      [=](plan_atom, std::int64_t slot) -> caf::result<plan_decision> {
        auto& st = self->state;
        if (!st.policy) return caf::make_error(caf::sec::runtime_error, "unknown policy '" + st.cfg.policy + "'");
        // One queue update a slot, with the slot's mean cost a step: the budget bounds the
        // average step, and the queue moves at the pace of the decisions it steers.
        // Energy likewise: each device's mean joules a step against its budget.
        if (st.slot_steps > 0) {
          std::vector<std::pair<int, double>> energy;
          for (const auto& [id, j] : st.slot_energy) energy.emplace_back(id, j / st.slot_steps);
          st.queues->update(st.slot_cost / st.slot_steps, energy);
        }
        st.slot_cost = 0;
        st.slot_energy.clear();
        st.slot_steps = 0;
        const planner::cluster_state view = st.estimates->view(st.cfg.cluster, {});
        planner::problem p(st.cfg.profile, view, st.cfg.planner, st.cfg.budget);
        auto next = st.policy->decide({p, st.current ? &*st.current : nullptr, st.queues->state(), slot});
        if (!next) return caf::make_error(caf::sec::runtime_error, next.err().message);
        // Hysteresis, unless devices came or went since the last decision.
        if (st.cfg.hysteresis && st.current && st.events.empty()) {
          const double noise = std::max(st.cfg.planner.replan_margin, st.ratio_n >= 5 ? st.ratio_dev : 0.0);
          const auto c = planner::check_switch(p, *st.current, *next, st.queues->state(),
                                               st.cfg.plan_lifetime_slots * st.cfg.replan_every, noise);
          if (c.keep) {
            logging::get("controller")->info("slot {}: {} (proposed {})", slot, c.why, planner::describe(*next));
            ++st.kept;
            *next = *st.current;
          }
        }
        plan_decision d;
        d.plan = *next;
        d.reason = explain(st, p, *next);
        if (auto r = planner::evaluate(p, *next, st.current ? &*st.current : nullptr, st.queues->state())) d.predicted_s = r->batch_time_s;
        d.queue = st.queues->cost_backlog();
        st.events.clear();
        st.decided_speeds.clear();
        for (const auto& dev : view.devices) st.decided_speeds.push_back(dev.available ? dev.speed : 0.0);
        if (!st.current || !(st.current->groups == next->groups)) st.first_step = true;
        if (auto steady = planner::evaluate(p, *next, &*next, st.queues->state())) st.steady_pred = steady->batch_time_s;
        st.current = *next;
        d.kept_plans = st.kept;
        return d;
      },
  };
}

}  // namespace

caf::actor spawn_controller(caf::actor_system& sys, const controller_config& cfg) { return sys.spawn(controller, cfg); }

}  // namespace dynapar::actors
