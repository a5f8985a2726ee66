#include "control/run_loop.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace dynapar::control {

run_loop::run_loop(run_cadence c) : c_(std::move(c)), t_(c_.start) {
  if (c_.slot_steps < 1) c_.slot_steps = 1;
  if (c_.replan_every < 1) c_.replan_every = 1;
}

bool run_loop::replan_due(std::int64_t t) const {
  return c_.controller ? t % c_.replan_every == 0 : t > 0 && c_.replan_steps.count(t) > 0;
}

std::vector<run_duty> run_loop::after_duties(std::int64_t t) const {
  const auto due = [n = t + 1](std::int64_t every) { return every > 0 && n % every == 0; };
  std::vector<run_duty> d;
  if (t == c_.perturb_step) d.push_back(run_duty::perturb);
  if (due(c_.hash_every)) d.push_back(run_duty::check_replicas);
  if (due(c_.checkpoint_every)) d.push_back(run_duty::checkpoint);
  if (due(c_.epoch_steps)) d.push_back(run_duty::evaluate);
  return d;
}

due_duties run_loop::due_before(std::int64_t next, const run_facts& f) const {
  due_duties d;
  d.slot = next < c_.steps && next / c_.slot_steps > slot_;
  d.replan = forced_ || changed_ || replan_due(next);
  d.after_step = next > c_.start && !after_duties(next - 1).empty();
  d.faults = f.faults_due;
  d.members = f.member_died || f.members_move;
  d.recovering = f.recovering;
  return d;
}

bool run_loop::may_start_early(std::int64_t next, const run_facts& f) const {
  return c_.pipelined && next < c_.steps && !due_before(next, f).any();
}

void run_loop::open(std::int64_t t, bool early) {
  t_ = t;
  at_ = early ? where::step : where::open;
  early_ = early;
  moved_ = false;
  opening_ = true;
}

run_command run_loop::next(bool member_died) {
  run_command c;
  c.step = t_;
  c.opens = opening_ && at_ != where::over;
  opening_ = false;
  switch (at_) {
    case where::open:
      // The end's work, unless a re-plan is owed first (a device lost in the last checks).
      if (t_ == c_.steps && !forced_ && !member_died) {
        at_ = where::finish;
        c.what = run_duty::finish;
        break;
      }
      at_ = where::gather;
      if (t_ < c_.steps && t_ / c_.slot_steps > slot_) {  // a rollback enters no past slot again
        slot_ = t_ / c_.slot_steps;
        at_ = where::open;  // slot_entered moves on
        c.what = run_duty::enter_slot;
        break;
      }
      c.what = run_duty::gather;
      break;
    case where::gather: c.what = run_duty::gather; break;
    case where::await: c.what = run_duty::await_devices; break;
    case where::plan:
      c.what = run_duty::plan;
      c.replan = forced_ || changed_ || replan_due(t_);
      forced_ = changed_ = false;
      break;
    case where::apply: c.what = run_duty::apply; break;
    case where::retire: c.what = run_duty::retire; break;
    case where::step:
      c.what = run_duty::step;
      c.early = early_;
      c.moved = moved_;
      break;
    case where::after:
      if (after_.empty()) {
        open(t_ + 1, next_started_);
        return next(member_died);
      }
      c.what = after_.front();
      break;
    case where::recover:
      c.what = run_duty::recover;
      c.step = recover_at_;
      c.committed = recover_committed_;
      break;
    case where::finish: c.what = run_duty::finish; break;
    case where::over: c.what = run_duty::stop; break;
  }
  c.slot = slot_;
  return c;
}

namespace {
void expect(bool in_turn, const char* event) {
  if (!in_turn) throw std::logic_error(std::string("run_loop: ") + event + " out of turn");
}
}  // namespace

void run_loop::slot_entered(bool changed) {
  expect(at_ == where::open, "slot_entered");
  changed_ = changed_ || changed;
  at_ = where::gather;
}

void run_loop::gathered(bool changed, bool died, bool none_joined) {
  expect(at_ == where::gather, "gathered");
  changed_ = changed_ || changed;
  if (died) {
    recover_at_ = t_;
    recover_committed_ = false;
    at_ = where::recover;
  } else {
    reopen_after_await_ = false;
    at_ = none_joined ? where::await : where::plan;
  }
}

void run_loop::awaited(bool changed) {
  expect(at_ == where::await, "awaited");
  changed_ = changed_ || changed;
  if (!reopen_after_await_) {
    at_ = where::plan;
    return;
  }
  forced_ = true;  // plan the step again with whoever joined
  open(t_, false);
}

void run_loop::planned(bool decided) {
  expect(at_ == where::plan, "planned");
  at_ = decided ? where::apply : where::retire;
}

void run_loop::infeasible() {
  expect(at_ == where::plan, "infeasible");
  reopen_after_await_ = true;
  at_ = where::await;
}

void run_loop::applied(bool moved) {
  expect(at_ == where::apply, "applied");
  moved_ = moved;
  at_ = where::retire;
}

void run_loop::retired() {
  expect(at_ == where::retire, "retired");
  if (t_ == c_.steps) return open(t_, false);  // re-planned without the lost: the end again
  at_ = where::step;
}

void run_loop::committed(bool next_started) {
  expect(at_ == where::step, "committed");
  after_ = after_duties(t_);
  next_started_ = next_started;
  at_ = where::after;
}

void run_loop::step_failed(bool committed) {
  expect(at_ == where::step, "step_failed");
  recover_at_ = t_;
  recover_committed_ = committed;
  at_ = where::recover;
}

void run_loop::done() {
  if (at_ == where::finish) {
    at_ = where::over;
    return;
  }
  expect(at_ == where::after && !after_.empty(), "done");
  after_.erase(after_.begin());
}

void run_loop::failed() {
  recover_committed_ = false;
  switch (at_) {
    case where::apply: recover_at_ = t_; break;        // step t has not started
    case where::after: recover_at_ = t_ + 1; break;    // step t stands
    case where::finish: recover_at_ = c_.steps; break;
    default: expect(false, "failed");
  }
  at_ = where::recover;
}

void run_loop::recovered(std::int64_t next_step, bool replans) {
  expect(at_ == where::recover, "recovered");
  forced_ = forced_ || replans;
  open(next_step, false);
}

}  // namespace dynapar::control
