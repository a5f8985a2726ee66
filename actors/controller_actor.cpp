#include "actors/controller_actor.hpp"

#include <memory>
#include <optional>

#include "actors/messages.hpp"
#include "common/rng.hpp"
#include "planner/lyapunov.hpp"
#include "planner/policy.hpp"
#include "sim/estimator.hpp"

namespace dynapar::actors {
namespace {

struct controller_state {
  controller_config cfg;
  std::unique_ptr<planner::policy> policy;
  std::unique_ptr<planner::virtual_queues> queues;
  std::unique_ptr<sim::estimator> estimates;
  std::optional<planner::plan> current;
  rng noise{1};  // the estimator's noise hook; measurements here are real, so noise is 0
  static inline const char* name = "controller";
};

// Per-stage compute times of one step under the plan in force, as the estimator reads them.
sim::step_outcome as_outcome(const planner::plan& p, const step_measure& m) {
  sim::step_outcome out;
  for (const auto& g : p.groups)
    for (std::size_t j = 0; j < g.devices.size(); ++j) {
      sim::stage_measure st;
      st.device = g.devices[j];
      st.first_layer = g.splits[j];
      st.end_layer = g.splits[j + 1];
      st.samples = g.share;
      st.micro_batches = (g.share + g.micro_batch - 1) / g.micro_batch;
      for (const auto& [id, s] : m.compute_s)
        if (id == st.device) st.compute_s = s;
      out.stages.push_back(st);
    }
  return out;
}

caf::behavior controller(caf::stateful_actor<controller_state>* self, controller_config cfg) {
  auto& s = self->state;
  s.cfg = std::move(cfg);
  s.policy = std::move(*planner::make_policy(s.cfg.policy));
  s.queues = std::make_unique<planner::virtual_queues>(s.cfg.budget);
  s.estimates = std::make_unique<sim::estimator>(s.cfg.cluster, s.cfg.profile, 0.5);
  return {
      // What a step really took: learn speeds and charge its cost to the queues.
      [=](report_atom, const step_measure& m) {
        auto& st = self->state;
        if (!st.current) return;
        planner::problem nominal(st.cfg.profile, st.cfg.cluster, st.cfg.planner, st.cfg.budget);
        st.estimates->observe(as_outcome(*st.current, m), nominal, 0.0, st.noise);
        double price = 0;
        for (const auto& g : st.current->groups)
          for (int id : g.devices)
            if (const int i = nominal.links.index_of(id); i >= 0) price += st.cfg.cluster.devices[i].price_per_s;
        st.queues->update(price * m.time_s, {});
      },
      // The next slot's plan, from what has been measured so far.
      [=](plan_atom, std::int64_t slot) -> caf::result<planner::plan> {
        auto& st = self->state;
        const planner::cluster_state view = st.estimates->view(st.cfg.cluster, {});
        planner::problem p(st.cfg.profile, view, st.cfg.planner, st.cfg.budget);
        auto next = st.policy->decide({p, st.current ? &*st.current : nullptr, st.queues->state(), slot});
        if (!next) return caf::make_error(caf::sec::runtime_error, next.err().message);
        st.current = *next;
        return *next;
      },
  };
}

}  // namespace

caf::actor spawn_controller(caf::actor_system& sys, const controller_config& cfg) { return sys.spawn(controller, cfg); }

}  // namespace dynapar::actors
