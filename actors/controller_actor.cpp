#include "actors/controller_actor.hpp"

#include <algorithm>
#include <memory>

#include "actors/messages.hpp"
#include "control/controller.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors {
namespace {

struct controller_state {
  std::unique_ptr<control::controller> core;  // decides; this actor only relays
  std::string error;                          // set: every plan request fails with it
  static inline const char* name = "controller";
};

controller_actor::behavior_type controller(controller_actor::stateful_pointer<controller_state> self,
                                           const training::control_settings& cfg) {
  std::shared_ptr<planner::policy> policy = cfg.custom;
  if (!policy) {
    if (auto p = planner::make_policy(cfg.policy)) policy = std::move(*p);
    else self->state.error = "unknown policy '" + cfg.policy + "'";
  }
  self->state.core = std::make_unique<control::controller>(control::paced(cfg.core, {cfg.replan_every, cfg.plan_lifetime_slots, true}), std::move(policy));
  if (cfg.restore) self->state.core->restore(*cfg.restore);
  return {
      [=](snapshot_atom) { return self->state.core->snapshot(); },
      [=](join_atom, int id, double measured_speed, double memory_bytes, int node) {
        self->state.core->join(id, measured_speed, memory_bytes, node);
      },
      [=](leave_atom, int id) { self->state.core->leave(id); },
      // What a step really took: learn speeds and links; its cost counts towards the slot.
      [=](report_atom, const control::measurement& m) { self->state.core->observe(m); },
      // The next slot's plan, from what has been measured so far.
      [=](plan_atom, std::int64_t slot) -> caf::result<control::decision> {
        if (!self->state.error.empty()) return caf::make_error(caf::sec::runtime_error, self->state.error);
        auto d = self->state.core->decide(slot);
        if (!d) return caf::make_error(caf::sec::runtime_error, d.err().message);
        if (!d->kept_why.empty()) logging::get("controller")->info("slot {}: {}", slot, d->kept_why);
        if (!d->reverted_why.empty()) logging::get("controller")->warn("slot {}: {}", slot, d->reverted_why);
        return std::move(*d);
      },
  };
}

}  // namespace

controller_actor spawn_controller(caf::actor_system& sys, const training::control_settings& cfg) { return sys.spawn(controller, cfg); }

}  // namespace dynapar::actors
