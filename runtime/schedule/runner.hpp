// Walks one stage's program for a device actor: says which instruction runs next, or that
// the stage must wait for a message. Pure; the actor does the work and reports arrivals.
#pragma once

#include <set>

#include "schedule/schedule.hpp"

namespace dynapar::schedule {

class stage_runner {
 public:
  stage_runner() = default;
  explicit stage_runner(program p) : prog_(std::move(p)) {}
  // The next instruction if it can run now (a receive only once its message arrived).
  const instruction* next() const;
  void done() { ++pc_; }                      // the instruction next() gave has been executed
  void arrived_activation(int micro) { acts_.insert(micro); }
  void arrived_gradient(int micro) { grads_.insert(micro); }
  bool finished() const { return pc_ >= prog_.size(); }
  bool waiting() const { return !finished() && next() == nullptr; }

 private:
  program prog_;
  std::size_t pc_ = 0;
  std::set<int> acts_, grads_;
};

}  // namespace dynapar::schedule
