// The public surface (include/dynapar/actors/api.hpp) over the typed actors: the handles a
// program outside this tree holds are untyped, since the messages they type are internal.
#include "actors/api.hpp"

#include "actors/controller_actor.hpp"
#include "actors/device_actor.hpp"
#include "actors/session.hpp"

namespace dynapar::actors {

caf::actor start_device(caf::actor_system& sys, const device_config& cfg) {
  return caf::actor_cast<caf::actor>(spawn_device(sys, cfg));
}

caf::actor start_controller(caf::actor_system& sys, const training::control_settings& cfg) {
  return caf::actor_cast<caf::actor>(spawn_controller(sys, cfg));
}

result<training::train_outcome> train(caf::actor_system& sys, const actor_cluster& actors, const model::model_chain& m,
                                      const data::dataset& train_data, const training::train_settings& s,
                                      const training::train_callbacks& callbacks) {
  cluster_actors typed;
  for (const auto& [id, a] : actors.devices) {
    if (!a) return make_error("bad_config", "device " + std::to_string(id) + " has no actor (start_device gives one)");
    typed.devices[id] = caf::actor_cast<device_handle>(a);
  }
  if (actors.controller) typed.controller = caf::actor_cast<controller_actor>(actors.controller);
  return train(sys, typed, m, train_data, s, callbacks);
}

}  // namespace dynapar::actors
