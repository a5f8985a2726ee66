// The controller: holds a policy (any by name, or the caller's own), its virtual queues and
// the speed and link estimates it learns from the step reports (it never reads configured
// speeds), hears devices join and leave, and answers each slot with the next plan and why.
// Thin: control::controller decides.
#pragma once

#include <caf/all.hpp>

#include "actors/trainer.hpp"

namespace dynapar::actors {

// Messages: (join_atom, id, measured speed), (leave_atom, id), (report_atom, control::measurement)
// and (plan_atom, slot) -> control::decision.
caf::actor spawn_controller(caf::actor_system& sys, const controller_config& cfg);

}  // namespace dynapar::actors
