// What the driver does after a failed attempt at a step (docs/RELIABILITY.md), decided from
// facts alone: which devices hold which layers, which were lost now and since the plan in
// force was applied, whether the attempt reached its apply phase, where the last consistent
// cut is. Pure (standard library only), so that every case is unit-tested; the driver
// carries the decision out (kills, ledger, re-plan, rollback).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dynapar::control {

struct recovery_facts {
  std::map<int, std::vector<int>> holders;  // layer -> devices, under the plan in force
  std::set<int> wiped;                      // lost by earlier recoveries since that plan
  std::set<int> lost;                       // found lost now (stopped, or silent to probes)
  bool late = false;                        // the attempt missed its deadline
  bool committed = false;                   // it reached its apply phase: every holder applied it
  bool controller = false;                  // a controller can re-plan without the lost
  std::int64_t step = 0;                    // the attempt's step
  std::int64_t cut_step = 0;                // the last consistent cut (rollback point)
  int late_retries = 0;                     // consecutive late attempts before this one
  int max_late_retries = 4;
};

struct recovery_decision {
  enum class action {
    give_up,        // not a fault this can mend (`why` says what)
    retry_late,     // every device answers: settle the step as done or re-run, no re-plan
    go_on,          // re-plan without the lost; every layer still has a live replica
    roll_back,      // a layer lost every replica: back to the cut, re-run the steps since
  } what = action::give_up;
  std::string code, why;                    // give_up: an error code and what happened ("": the
                                            // failure itself is the error, no device was lost)
  std::int64_t next_step = 0;               // where training goes on
  bool step_applied = false;                // the attempt's step counts as applied
  std::vector<std::int64_t> undone;         // steps whose samples return (roll_back)
  std::set<int> wiped;                      // devices holding nothing under the plan in force, after this
};

recovery_decision decide_recovery(const recovery_facts& f);

}  // namespace dynapar::control
