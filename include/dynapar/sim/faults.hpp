// A job's fault plan (docs/RELIABILITY.md, "Fault plans"): faults at given steps, and seeded
// random ones, expanded into one list in step order. Plain data and a pure function, so the
// same seed gives the same experiment in one process and over node processes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dynapar::sim {

// corrupt: silent data corruption, one device's replica of one layer nudged (a test hook:
// replica hashes catch it where the layer has replicas, only --verify where it has none).
enum class fault_kind { kill, slow, pause, partition, corrupt };

const char* name(fault_kind k);

// When in its step a kill (or a pause: sum, checkpoint, evaluation) lands (docs/RELIABILITY.md,
// "Fault plans"). `step`: at a random moment of the step. The others wait, from their step
// on, for the next such moment of the run: `replan` the first step whose plan change moved
// layers (at a random moment of it), `migration` while those layers move, `sum` once every
// stage of a step has reported (the holders' sums under way), `checkpoint` while a consistent
// cut copies the layers, `evaluation` while the devices evaluate the validation set (after an
// epoch, or at the end).
// early: just after the next step went out with this one's commit (pipelined control), while
// the holders apply it; shard: while the holders write a checkpoint's shards.
// placement: while the controller places layers (the first plan's, at the run's first step,
// or a rollback's); joining: on the next device to join, while it joins (its benchmark).
enum class fault_moment { step, replan, migration, sum, checkpoint, evaluation, early, shard, placement, joining };

const char* name(fault_moment m);
// The moment named `text`, or false.
bool moment_of(const std::string& text, fault_moment& out);

struct fault {
  std::int64_t step = 0;
  fault_kind kind = fault_kind::kill;
  int device = -1;          // -1: one of the devices the plan in force uses, drawn at the step
  double factor = 1;        // slow: speed multiplier in (0, 1]
  int steps = 0;            // slow: how many steps
  double seconds = 0;       // pause, partition: how long the device is hung / cut off
  fault_moment moment = fault_moment::step;  // kill, pause: when in the step (above)
};

// Faults at random steps in [from_step, to_step] (to_step -1: the run's last step), each on
// a device drawn when it fires. Kills and pauses land at a random moment of their step.
struct random_faults {
  int kills = 0, pauses = 0, slows = 0;
  std::int64_t from_step = 1, to_step = -1;
  double pause_s = 6;       // long enough to miss the step deadline
  double slow_factor = 0.25;
  int slow_steps = 20;
};

struct fault_plan {
  std::vector<fault> at;
  random_faults random;
  std::uint64_t seed = 0;   // 0: the job's seed
};

// Every fault of the plan for a run of `steps` steps, sorted by step (stable: listed faults
// keep their order). Random steps are drawn from `seed`.
std::vector<fault> expand(const fault_plan& plan, std::int64_t steps, std::uint64_t seed);

}  // namespace dynapar::sim
