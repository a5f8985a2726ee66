// A device: holds layers (a model::device_worker) and executes its stage's program of each
// step, exchanging activations and gradients with its neighbours. Spawned detached (its own
// thread: LibTorch work blocks). Thin: the stage_runner decides what runs next.
#pragma once

#include <caf/all.hpp>

#include "model/api.hpp"

namespace dynapar::actors {

// Spawns a detached device actor monitored by `parent`. speed < 1 emulates a slower device:
// after each forward and backward it sleeps (1 / speed - 1) times the work's duration, so a
// machine plays a heterogeneous cluster without adding CPU load (sleeping uses no core).
caf::actor spawn_device(caf::local_actor* parent, int device_id, const model::optimizer_config& opt, double speed = 1);

}  // namespace dynapar::actors
