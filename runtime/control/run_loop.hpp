// The run's loop between steps as a pure state machine (issue 72): what happens between one
// step and the next (enter a slot, gather departures, recover, wait for devices, plan, apply,
// retire leavers), the step itself, the duties after it (perturbation, replica check,
// checkpoint, evaluation) and the end. The driver asks `next` for a command, carries it out
// and tells the loop how it went; the loop never rewinds a step by hand: a recovery says where
// the run goes on. Whether the next step may start with this one's commit (pipelined control)
// is one query on the same rules that order the duties (`due_before`), not a second list.
// No actors, no clock: actors/driver_run.cpp pumps it, the tests feed it synthetic outcomes.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace dynapar::control {

// The job's cadences, as the loop reads them.
struct run_cadence {
  std::int64_t start = 0;                // the first step (a resumed run's checkpoint step)
  std::int64_t steps = 0;                // the end: after step steps-1
  std::int64_t slot_steps = 1;           // steps per slot (the dynamics' and the controller's)
  bool controller = false;               // plans come from the controller, re-planned every replan_every
  std::int64_t replan_every = 1;
  std::set<std::int64_t> replan_steps;   // without a controller: the job's scheduled re-plans
  std::int64_t hash_every = 0;           // replica checks after every n-th step (0: none)
  std::int64_t checkpoint_every = 0;     // checkpoints likewise
  std::int64_t epoch_steps = 0;          // evaluations after each epoch of this many steps (0: none)
  std::int64_t perturb_step = -1;        // a replica nudged after this step (tests)
  bool pipelined = false;                // pipelined control: early starts allowed
};

// What the driver knows between steps that the loop cannot.
struct run_facts {
  bool member_died = false;   // a device in the run was seen stopping
  bool members_move = false;  // devices leaving, or a node lost or asking to leave
  bool faults_due = false;    // injected faults due at the step, kills waiting for a moment
                              // between steps, or a slow-down ending
  bool recovering = false;    // a recovery not yet ended by the next step's start
};

// The duties due before step `next` (and after the step before it). Each one the loop acts on
// is here, so that an early start skips nothing due.
struct due_duties {
  bool slot = false;          // a slot begins: its dynamics, joins and departures
  bool replan = false;        // a plan change: the cadence's, or one forced (recovery, membership)
  bool after_step = false;    // perturbation, replica check, checkpoint or evaluation of step next-1
  bool faults = false;
  bool members = false;
  bool recovering = false;
  bool any() const { return slot || replan || after_step || faults || members || recovering; }
};

enum class run_duty {
  enter_slot,      // the slot's dynamics, joins and departures (`slot`)
  gather,          // departures asked for, devices seen stopping: gathered()
  recover,         // after the failure the driver holds (`committed`: it reached its apply phase): recovered()
  await_devices,   // none joined, or too few to hold the model: awaited()
  plan,            // the next plan (`replan`: due or forced): planned() or infeasible()
  apply,           // the decided plan: applied() or failed()
  retire,          // leavers out, a recovery's end noted: retired()
  step,            // step `step` (`early`: started with the commit before; `moved`: its plan moved layers)
  perturb,         // after step `step`: a replica nudged (tests)
  check_replicas,  // after step `step`: done() or failed()
  checkpoint,      // after step `step`
  evaluate,        // after step `step`, the end of an epoch
  finish,          // the end: validation, final check, the trained layers: done() or failed()
  stop,            // the run is over
};

struct run_command {
  run_duty what = run_duty::stop;
  std::int64_t step = 0;
  std::int64_t slot = 0;      // the slot entered, or the one the step is in
  bool opens = false;         // the first command of an attempt at `step`: its record and time start
  bool committed = false;     // recover
  bool replan = false;        // plan
  bool early = false;         // step
  bool moved = false;         // step
};

class run_loop {
 public:
  explicit run_loop(run_cadence c);

  // What to do now; `member_died` (run_facts::member_died): the end's work waits for a
  // re-plan first.
  run_command next(bool member_died = false);
  // How the last command went.
  void slot_entered(bool changed);
  void gathered(bool changed, bool died, bool none_joined);
  void awaited(bool changed);
  void planned(bool decided);
  void infeasible();  // too few devices left to hold the model: wait for more, plan again
  void applied(bool moved);
  void retired();
  // The step committed; `next_started`: the step after went out with it (may_start_early).
  void committed(bool next_started);
  void step_failed(bool committed);
  void done();     // perturb, a check, a checkpoint, an evaluation or the end's work
  void failed();   // apply, a check or the end's work failed: recover
  // A recovery: where the run goes on; `replans`: the plan changes (not a late retry).
  void recovered(std::int64_t next_step, bool replans);

  // The duties before step `next` given the driver's facts.
  due_duties due_before(std::int64_t next, const run_facts& f) const;
  // Pipelined control: whether step `next` may start with the commit of step next-1.
  bool may_start_early(std::int64_t next, const run_facts& f) const;
  std::int64_t step() const { return t_; }
  bool over() const { return at_ == where::over; }

 private:
  enum class where { open, gather, await, plan, apply, retire, step, after, recover, finish, over };
  bool replan_due(std::int64_t t) const;
  std::vector<run_duty> after_duties(std::int64_t t) const;
  void open(std::int64_t t, bool early);

  run_cadence c_;
  std::int64_t t_ = 0, slot_ = -1;
  where at_ = where::open;
  bool opening_ = true;           // the next command opens an attempt
  bool changed_ = false;          // membership changed since the last plan
  bool forced_ = false;           // a re-plan forced (recovery, too few devices)
  bool reopen_after_await_ = false;
  bool moved_ = false, early_ = false, next_started_ = false;
  bool recover_committed_ = false;
  std::int64_t recover_at_ = 0;
  std::vector<run_duty> after_;   // the duties left after the step
};

}  // namespace dynapar::control
