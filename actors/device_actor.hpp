// A device: holds layers (a model::device_worker) and executes its stage's program of each
// step, exchanging activations and gradients with its neighbours over emulated links. It
// lives as long as the device takes part (across plans: groups form around it), sends its
// layers to other devices when a plan moves them, and runs at an emulated speed. Spawned
// detached (its own thread: LibTorch work blocks). Thin: the stage_runner decides what runs.
#pragma once

#include <caf/all.hpp>

#include "model/api.hpp"

namespace dynapar::actors {

struct device_config {
  int id = 0;
  model::optimizer_config optimizer;
  // Relative speed (0, 1]: each forward and backward lasts its CPU time / speed (the device
  // sleeps the difference), so one machine plays a slower device without adding CPU load.
  double speed = 1;
  // Emulated memory (bytes, 0: none): the layers a device holds with their optimizer state
  // must fit, or holding one more fails as an out-of-memory would (activations are not
  // counted: docs/RUNTIME.md).
  double memory_bytes = 0;
  // Where it computes: "cpu" or "cuda:N", already checked (model::check_place).
  std::string place = "cpu";
};

caf::actor spawn_device(caf::actor_system& sys, const device_config& cfg);

}  // namespace dynapar::actors
