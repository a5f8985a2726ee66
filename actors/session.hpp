// Training inside the caller's own CAF actor system, with device and controller actors the
// caller spawned (examples/actor_api.cpp). Devices that join later under the emulated
// dynamics are spawned here; the caller's actors are stopped when they leave or at the end.
#pragma once

#include <caf/all.hpp>

#include <map>

#include "actors/trainer.hpp"

namespace dynapar::actors {

struct cluster_actors {
  std::map<int, caf::actor> devices;  // by device id (actors/device_actor.hpp)
  caf::actor controller;              // optional (actors/controller_actor.hpp); re-plans every
                                      // settings.slot_steps steps unless settings.controller says
};

result<train_outcome> train(caf::actor_system& sys, cluster_actors& actors, const model::model_chain& m,
                            const data::dataset& train_data, const train_settings& s, const train_callbacks& callbacks = {});

}  // namespace dynapar::actors
