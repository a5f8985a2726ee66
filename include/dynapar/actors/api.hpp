// dynapar's actors in your own CAF actor system (examples/actor_api.cpp): spawn device and
// controller actors from code, with a policy of your own, and train with them. The handles are
// plain caf::actor: the actors' messages are internal (actors/messages.hpp), so a program
// built against the installed headers links, monitors and stops them, and trains through
// `train`, which drives them. The whole run in a system of its own: actors/trainer.hpp.
#pragma once

#include <caf/all.hpp>

#include <map>
#include <memory>
#include <string>

#include "actors/trainer.hpp"
#include "model/api.hpp"
#include "training/settings.hpp"

namespace dynapar::actors {

// One device actor's settings.
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
  // exact: false through Gloo (reduce_task::store): the address its ring connections use,
  // and how long joining or one all-reduce may wait for a peer.
  std::string gloo_host = "127.0.0.1";
  double gloo_timeout_s = 30;
  // The model's layers, for one placed from a checkpoint shard (null: no shard can be).
  std::shared_ptr<const model::layer_source> layers{};
};

// The actors a run trains with: devices by id, and optionally a controller that re-plans
// every settings.slot_steps steps (without one, the settings' plan holds). Devices that join
// later under the emulated dynamics are spawned by `train`; every actor here is stopped when
// its device leaves or at the end.
struct actor_cluster {
  std::map<int, caf::actor> devices;
  caf::actor controller;
};

caf::actor start_device(caf::actor_system& sys, const device_config& cfg);
// The controller: the policy by name or cfg.custom (your own planner::policy), its virtual
// queues and the estimates it learns from step reports.
caf::actor start_controller(caf::actor_system& sys, const training::control_settings& cfg);
// A null handle is an error naming it; the handles must be ones start_device and
// start_controller returned.
result<training::train_outcome> train(caf::actor_system& sys, const actor_cluster& actors, const model::model_chain& m,
                                      const data::dataset& train_data, const training::train_settings& s,
                                      const training::train_callbacks& callbacks = {});

}  // namespace dynapar::actors
