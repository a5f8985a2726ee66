// A device: holds layers (a model::device_worker) and executes its stage's program of each
// step, exchanging activations and gradients with its neighbours over emulated links. It
// lives as long as the device takes part (across plans: groups form around it), sends its
// layers to other devices when a plan moves them, and runs at an emulated speed. Spawned
// detached (its own thread: LibTorch work blocks). Thin: the stage_runner decides what runs.
#pragma once

#include <caf/all.hpp>

#include "actors/api.hpp"
#include "actors/messages.hpp"
#include "model/api.hpp"

namespace dynapar::actors {

// Everything a device takes, checked at compile time; the remote proxy (actors/remote/proxy.hpp)
// takes the same, so the driver and the groups cannot tell a device on a node from one here.
// A device's peers see only the device_peer part (actors/messages.hpp).
using device_handle = device_peer::extend<
    caf::replies_to<hold_atom, int, model::layer_copy>::with<bool>,  // place a layer (at start, or restored)
    caf::replies_to<hold_atom, int, training::shard_file>::with<bool>,  // place a layer from its checkpoint shard
    caf::replies_to<migrate_atom, int, int, device_peer, comm::link_spec, migration_sink>::with<bool>,
    // A migration's target, before the giver sends: take this layer from that device, once.
    caf::replies_to<expect_atom, int, int>::with<bool>,
    caf::replies_to<drop_atom, int>::with<bool>, caf::reacts_to<memory_atom, double>, caf::reacts_to<speed_atom, double>,
    caf::reacts_to<timing_atom, std::vector<double>>, caf::replies_to<probe_atom>::with<double>,
    caf::reacts_to<step_atom, stage_task>,
    caf::replies_to<grads_atom, std::int64_t, std::vector<int>>::with<device_gradients>,
    caf::replies_to<apply_atom, std::int64_t, int, std::vector<model::tensor>, double, double>::with<applied>,
    caf::replies_to<reduce_atom, reduce_task>::with<sum_held>,
    caf::replies_to<commit_atom, std::int64_t, int, double, double>::with<applied>,
    caf::replies_to<hash_atom, int>::with<std::uint64_t>, caf::replies_to<copy_atom, int>::with<model::layer_copy>,
    caf::replies_to<copy_lean_atom, int>::with<model::layer_copy>,
    // Writes the layer's checkpoint shard there (an error in the answer: not written).
    caf::replies_to<save_atom, int, std::string>::with<wire::ops::shard_saved>,
    // Fault injection: dies (after us), goes silent (after us, for s, cut off or hung), a layer perturbed.
    caf::reacts_to<fail_atom, int>, caf::reacts_to<pause_atom, int, double, bool>, caf::reacts_to<perturb_atom, int>>;

device_handle spawn_device(caf::actor_system& sys, const device_config& cfg);

}  // namespace dynapar::actors
