// The controller: holds a policy (any by name, or the caller's own), its virtual queues and
// the speed and link estimates it learns from the step reports (it never reads configured
// speeds), hears devices join and leave, and answers each slot with the next plan and why.
// Thin: control::controller decides.
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "training/settings.hpp"

namespace dynapar::actors {

// Its messages, checked at compile time: a device joins with its measured speed (and, when
// its node described it, its memory and host's node; 0 and -1: as before), leaves, a step's
// measurement; the plan for a slot; the state for a checkpoint.
using controller_actor = caf::typed_actor<caf::reacts_to<join_atom, int, double, double, int>, caf::reacts_to<leave_atom, int>,
                                          caf::reacts_to<report_atom, control::measurement>,
                                          caf::replies_to<plan_atom, std::int64_t>::with<control::decision>,
                                          caf::replies_to<snapshot_atom>::with<control::controller_snapshot>>;

controller_actor spawn_controller(caf::actor_system& sys, const training::control_settings& cfg);

}  // namespace dynapar::actors
