// The online controller (docs/MODEL.md) as a state machine: devices join and leave,
// measured steps are observed, and each slot a decision is taken from what was learnt. The
// controller actor and the simulator both run this class, so training and simulation decide
// by the same code: virtual queues (cost and energy, paced over a known horizon), estimates,
// the policy, hysteresis and the explanation. Pure (standard library only).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "control/estimator.hpp"
#include "control/measurement.hpp"
#include "planner/lyapunov.hpp"
#include "planner/policy.hpp"

namespace dynapar::control {

struct controller_config {
  planner::model_profile profile;
  // Every device that may take part, as announced (ids, memory, prices, power, nodes, links).
  // Speeds are the estimates' starting point; availability as given until join/leave/announce.
  planner::cluster_state cluster;
  planner::planner_config planner;
  planner::budgets budget;         // horizon_slots > 0 paces the budgets over a known run
  // Weight of each step's measurement in the speed and bandwidth estimates.
  double smoothing = 0.1;
  // Hysteresis (planner/hysteresis.hpp): a new plan must gain more a step than the
  // predictions' measured noise plus its migration spread over the plan's expected life,
  // `planner.plan_steps` (the steps the search scores its migration over, too).
  bool hysteresis = false;
  // Regret check: a plan change whose steady steps measured slower than the plan before it,
  // by more than the noise (and not cheaper by as much), is undone at the next decision; the
  // layout undone is not taken again for `regret_hold_slots` decisions unless devices come
  // or go. Off: changes stand whatever they measured.
  bool regret = true;
  int regret_hold_slots = 5;
  bool explain = true;             // fill decision::reason (the simulator does not need it)
};

// The one rule from a run's own units to the controller's: a run's slot is `slot_steps`
// steps (a job's replan_every; the simulator's slot is one step), and a new plan is expected
// to stand `plan_lifetime_slots` slots: the planner scores its migration over that life,
// rounded to whole steps (planner_config::plan_steps), and the hysteresis weighs it over the
// same. With `joins`, every device is unknown (unavailable, speed 1) until it joins with its
// benchmark, as a training job's devices are. Used by the controller actor and the simulator alike.
struct pacing {
  int slot_steps = 1;
  double plan_lifetime_slots = 2;
  bool joins = false;
};
controller_config paced(controller_config c, const pacing& p);

struct decision {
  planner::plan plan;
  std::string reason;              // events seen and the planner's explanation
  double predicted_s = 0;          // step time the planner expects, migration included
  double queue = 0;                // cost queue backlog, in budgets
  int kept_plans = 0;              // changes turned down by hysteresis so far
  std::string kept_why;            // this one turned down: why, and what was proposed
  int reverted_plans = 0;          // changes undone by the regret check so far
  std::string reverted_why;        // this decision undid the last change: what each measured
};

// The regret check's arithmetic (controller_config::regret): the steady steps' times, costs
// and joules (all devices) under the plan before a change and under the change. The margin is the larger of
// `floor` and twice the standard error of the difference of the mean times, relative to the
// mean before; each side's variance is at least that of a relative step-to-step `noise`
// (what the machine showed before: two steps that happen to agree prove little). Undo when
// the change is slower by more than the margin and neither cheaper nor using less energy by
// more than it (a budget's choice). Fewer than 2 steps on either side: no verdict (undo
// false, margin 0).
struct regret_side {
  std::vector<double> time_s, cost, energy_j;  // a steady step's each
};
struct regret_verdict {
  bool undo = false;
  double before_s = 0, after_s = 0, margin = 0;
};
regret_verdict judge_regret(const regret_side& before, const regret_side& after, double floor, double noise);

// What the controller has learnt, for checkpoints: its queues and estimates.
struct controller_snapshot {
  planner::queue_state queues;
  estimator::learnt estimates;
};

class controller {
 public:
  controller(controller_config cfg, std::shared_ptr<planner::policy> policy);

  // A device arrives with the speed its benchmark measured (the estimate restarts there) and,
  // when memory_bytes > 0, the memory it has (its node may describe it: `--devices auto`),
  // which replaces the figure announced before; when node >= 0, the node (host) it is on, which
  // sets its links' tier in the plans (devices its node described share their host's).
  void join(int id, double measured_speed, double memory_bytes = 0, int node = -1);
  void leave(int id);
  // The cluster as now announced (the simulator's world each slot): availability changes
  // count as joins and leaves; speeds are ignored (the estimates hold them).
  void announce(const planner::cluster_state& c);
  // One step run under the plan in force; ignored before the first decision.
  void observe(const measurement& m);
  // Ends the slot: the queues take the mean cost and energy a step of the steps observed
  // since (none: no update). decide() does it first; callers may do it earlier to read them.
  void close_slot();
  // The plan for `slot` from what was learnt; `hidden` devices are failing but not yet known
  // to be (shown available). Becomes the plan in force.
  result<decision> decide(std::int64_t slot, const std::vector<int>& hidden = {});
  // The last decision never ran (a device failed under it): the plan before it is in force again.
  void revoke(const std::string& why);

  const std::optional<planner::plan>& current() const { return current_; }
  planner::queue_state queues() const { return queues_.state(); }
  controller_snapshot snapshot() const { return {queues_.state(), estimates_.snapshot()}; }
  void restore(const controller_snapshot& s);

 private:
  void set_available(int id, bool on);
  // The queues as the planner sees them: with the predictions' measured bias (time_ratio).
  planner::queue_state planning_state() const;
  void update_bias(const std::vector<double>& steady_times);
  std::string explain(const planner::problem& p, const planner::plan& next) const;

  controller_config cfg_;
  std::shared_ptr<planner::policy> policy_;
  planner::virtual_queues queues_;
  estimator estimates_;
  std::optional<planner::plan> current_, before_;
  std::vector<std::string> events_;        // since the last decision
  std::vector<double> decided_speeds_;     // estimates at the last decision
  double slot_cost_ = 0;                   // summed over the slot's steps so far
  std::map<int, double> slot_energy_;      // joules by device, likewise
  int slot_steps_ = 0;
  // What update_bias learns from a slot's steady steps (slot_): the bias (median of the last
  // `bias_window` slots' log measured / decided prediction) and the noise (the steps' own,
  // moving mean over slots, plus the spread).
  std::deque<double> recent_bias_;
  static constexpr std::size_t bias_window = 9;
  double log_bias_ = 0, step_noise_ = 0, noise_ = 0;
  double decided_pred_ = 0;        // the plan in force's steady step, as predicted when decided
  bool first_step_ = true;                 // of the plan in force: it carries the migration
  int kept_ = 0;
  // The slot's steady steps (without migration) so far. The regret check: the last change on
  // trial (the plan before it and what that measured, and the change's own steady steps so
  // far); the layout last undone, refused until `until` unless devices come or go.
  regret_side slot_;
  struct trial {
    planner::plan before;
    regret_side before_steps, steps;
    double before_pred = 0;  // the plan before's steady step, predicted at the change
  };
  std::optional<trial> trial_;
  struct refused {
    planner::plan plan;
    std::int64_t until = 0;
    std::vector<double> speeds;  // the estimates when it was undone: a move of 15 % lifts it
  };
  std::optional<refused> refused_;
  int reverted_ = 0;
  std::set<int> doubted_;  // devices kept once against a proposal that dropped them
  std::string doubted_drop(const planner::cluster_state& view, const planner::plan& next);
  // The plan to go back to, when the change on trial is to be undone (its verdict comes once
  // it has 2 steady steps); why in `why`.
  std::optional<planner::plan> judge_trial(const planner::problem& p, const planner::queue_state& q, const regret_side& slot,
                                          std::string& why);
};

}  // namespace dynapar::control
