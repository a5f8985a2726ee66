// A pipeline step as data: what each stage does, in order. Generators are pure; executors
// (device actors, the simulator) walk the lists and fail loudly on what they do not know.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"
#include "planner/plan.hpp"

namespace dynapar::schedule {

enum class op {
  load,          // stage 0: take micro-batch m's inputs
  forward,       // run the stage's layers on micro-batch m
  backward,      // backward of micro-batch m (the last stage starts from the loss)
  send_act,      // activation of m to the next stage
  recv_act,      // activation of m from the previous stage
  send_grad,     // gradient of m's input to the previous stage
  recv_grad,     // gradient of m's output from the next stage
};
// A stage's program ends with its backwards: the gradient sums and the optimizer step are
// the driver's (actors/reduction.hpp), not instructions.

struct instruction {
  op kind = op::forward;
  int micro = -1;
  bool operator==(const instruction& o) const { return kind == o.kind && micro == o.micro; }
};

using program = std::vector<instruction>;

struct pipeline {
  planner::schedule_kind kind = planner::schedule_kind::one_f_one_b;
  int stages = 1;
  int micro_batches = 1;
  std::vector<program> programs;  // one per stage
};

// GPipe: all forwards, then all backwards in reverse. 1F1B: n - j - 1 warm-up forwards
// (1F1B-deep: twice as many), then one forward one backward, then the remaining backwards.
// One stage: F, B per micro-batch.
pipeline generate(planner::schedule_kind kind, int stages, int micro_batches);
// Evaluation (no backward): each stage forwards the micro-batches in order, stage 0 loading
// them, the others receiving them, each but the last sending them on.
pipeline forward_only(int stages, int micro_batches);

// Text form, one token per instruction: L3 F3 SA3 RA3 SG3 RG3 B3.
std::string to_text(const program& p);
result<program> parse(const std::string& text);

// Dry run: every stage executes its list with forward = t_f, backward = t_b and free messages;
// a receive waits for its send. Reports deadlocks (naming the stage and instruction),
// mismatched sends and receives, and micro-batches not forwarded and backwarded exactly once.
struct dry_run {
  double makespan = 0;                 // until the last optimizer step
  std::vector<int> peak_activations;   // per stage: most micro-batches held for backward at once
};
result<dry_run> validate(const pipeline& p, double t_forward = 1, double t_backward = 2);

}  // namespace dynapar::schedule
