// A device hosted by a node process, as the driver and the group supervisors see it
// (docs/DISTRIBUTED.md): an actor that speaks the device actor's messages (actors/messages.hpp)
// and forwards each as a device call through the hub, keeping a response promise until the
// node answers. A lost node fails every call waiting on it at once.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "actors/device_actor.hpp"
#include "actors/remote/hub.hpp"

namespace dynapar::actors::remote {

// A device's interface, and what the hub hands it: the node's answers, reports and arrivals
// (or, with id 0 and an error, that the node is lost).
using remote_device_handle = device_handle::extend<caf::reacts_to<remote_atom, wire::device_call, std::vector<model::tensor>>>;

// `gen`: which hosting of the device (a lost one may join again from elsewhere).
remote_device_handle spawn_remote_device(caf::actor_system& sys, int id, const std::string& route, std::uint64_t gen,
                               std::shared_ptr<remote_devices::impl> hub);

}  // namespace dynapar::actors::remote
