// Training inside the caller's own CAF actor system, with device and controller actors the
// caller spawned (examples/actor_api.cpp). Devices that join later under the emulated
// dynamics are spawned here; the caller's actors are stopped when they leave or at the end.
#pragma once

#include <caf/all.hpp>

#include <map>
#include <memory>
#include <optional>

#include "actors/controller_actor.hpp"
#include "actors/device_actor.hpp"
#include "actors/trainer.hpp"

namespace dynapar::actors {

// Devices hosted by node processes (actors/remote/hub.hpp): which may take part now, and
// the local actor that stands for each. A device joins at the next slot after its node
// does, and leaves after the current step once its node asks to.
class device_directory {
 public:
  virtual ~device_directory() = default;
  virtual bool present(int id) const = 0;  // hosted, and its node has not asked to leave
  virtual device_handle proxy(int id) = 0;  // null when not hosted
  virtual bool lost(int id) const = 0;      // its node went silent (a crash, not a leave)
  // Faults `dynapar inject` asked for since the last call (their step is ignored: now).
  virtual std::vector<sim::fault> injected() = 0;
  // Bytes of memory the device's node measured and announced (`dynapar node --devices auto`);
  // none: the job's figure holds.
  virtual std::optional<double> described_memory(int /*id*/) const { return std::nullopt; }
  // The host of a device its node described, numbered 0, 1, ... as hosts first joined (its
  // node's data address; its name without one): devices described on one host share it.
  virtual std::optional<int> described_host(int /*id*/) const { return std::nullopt; }
  // Whether the device's node builds a task's inputs and targets from its sample ids itself
  // (its heartbeat proved the job's data set): the driver then leaves them unbuilt (null).
  virtual bool builds_samples(int /*id*/) const { return false; }
};

struct cluster_actors {
  std::map<int, device_handle> devices;  // by device id
  controller_actor controller;        // optional (actors/controller_actor.hpp); re-plans every
                                      // settings.slot_steps steps unless settings.controller says
  // Without one, devices are spawned in this process; with one, only the devices it has
  // present take part, and their actors are its proxies.
  std::shared_ptr<device_directory> remote;
};

result<training::train_outcome> train(caf::actor_system& sys, cluster_actors& actors, const model::model_chain& m,
                                      const data::dataset& train_data, const training::train_settings& s,
                                      const training::train_callbacks& callbacks = {});

}  // namespace dynapar::actors
