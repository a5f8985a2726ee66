// The controller: holds a policy (any by name), its virtual queues and speed estimates learnt
// from the groups' stage reports (it never reads the configured speeds after the start), and
// answers each slot with the next plan. Thin: sim::estimator and the planner decide.
#pragma once

#include <caf/all.hpp>

#include <string>

#include "actors/trainer.hpp"

namespace dynapar::actors {

caf::actor spawn_controller(caf::actor_system& sys, const controller_config& cfg);

}  // namespace dynapar::actors
