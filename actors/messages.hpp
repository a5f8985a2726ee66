// Atoms and in-process message types of the actors. Tensors travel as shared handles (no
// copy); these types never leave the process (runtime/wire serialises what does).
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "model/api.hpp"
#include "planner/plan.hpp"
#include "schedule/schedule.hpp"

namespace dynapar::actors {

using hold_atom = caf::atom_constant<caf::atom("hold")>;
using step_atom = caf::atom_constant<caf::atom("step")>;
using act_atom = caf::atom_constant<caf::atom("act")>;
using grad_atom = caf::atom_constant<caf::atom("grad")>;
using grads_atom = caf::atom_constant<caf::atom("grads")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using hash_atom = caf::atom_constant<caf::atom("hash")>;
using copy_atom = caf::atom_constant<caf::atom("copy")>;
using devices_atom = caf::atom_constant<caf::atom("devices")>;
using perturb_atom = caf::atom_constant<caf::atom("perturb")>;
using report_atom = caf::atom_constant<caf::atom("report")>;
using plan_atom = caf::atom_constant<caf::atom("plan")>;

// One stage's part of a step.
struct stage_task {
  std::int64_t step = 0;
  schedule::program program;
  int lo = 0, hi = 0;                    // layers [lo, hi)
  std::vector<model::tensor> inputs;     // first stage: one per micro-batch
  std::vector<model::tensor> targets;    // last stage: one per micro-batch
  caf::actor prev, next;                 // neighbouring stages (null at the ends)
  caf::actor report_to;
};

struct stage_report {
  int device = 0;
  std::int64_t step = 0;
  double compute_s = 0;                  // forward and backward work
  double wait_s = 0;                     // blocked on a receive
  double loss_sum = 0;                   // last stage
  int messages = 0;                      // activations and gradients sent
  std::string error;                     // empty when the stage succeeded
};

// A group's part of a step: the micro-batches of its share.
struct group_task {
  std::int64_t step = 0;
  std::vector<model::tensor> inputs, targets;
  caf::actor report_to;
};

// One step as the controller sees it: its wall time and each device's compute seconds.
struct step_measure {
  std::int64_t step = 0;
  double time_s = 0;
  std::vector<std::pair<int, double>> compute_s;
};

struct group_report {
  int group = 0;
  std::int64_t step = 0;
  double loss_sum = 0;
  double time_s = 0;                     // from the supervisor's send to its last stage report
  std::vector<stage_report> stages;
  std::string error;
};

}  // namespace dynapar::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::model::tensor)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::model::layer_copy)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<dynapar::model::tensor>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<std::vector<dynapar::model::tensor>>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::stage_task)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::stage_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::group_task)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::group_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::actors::step_measure)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dynapar::planner::plan)
