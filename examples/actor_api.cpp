// dynapar as a library, actor style: a heterogeneous cluster built in your own CAF actor
// system from code (no YAML), with a policy of your own plugged into the controller. The
// driver forms groups around the devices as each plan says, and at the end the run is
// compared with one plain device. Build target `actor_api`; run
// `OPENBLAS_NUM_THREADS=1 build/bin/actor_api` (the speed emulation dilates each device thread's CPU time).
#include <caf/all.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>

// Only the public headers (include/dynapar; what `cmake --install` installs).
#include "actors/api.hpp"
#include "data/sampler.hpp"
#include "model/api.hpp"
#include "planner/policy.hpp"

using namespace dynapar;

namespace {

// A user's policy: data parallelism over the two devices the controller currently believes
// fastest, shares in proportion to their estimated speeds (multiples of the share quantum, so
// that training stays exact). The controller hands it estimates, never configured speeds.
class fastest_pair final : public planner::policy {
 public:
  std::string name() const override { return "fastest_pair"; }
  result<planner::plan> decide(const planner::decision_context& ctx) override {
    const auto& p = ctx.prob;
    std::vector<int> devs = p.available;  // device indices
    if (devs.empty()) return make_error("infeasible", "no device is available");
    std::sort(devs.begin(), devs.end(), [&](int a, int b) { return p.speed(a) > p.speed(b); });
    devs.resize(std::min<std::size_t>(2, devs.size()));
    const int q = p.cfg.share_quantum, units = p.cfg.batch / q;
    double total = 0;
    for (int i : devs) total += p.speed(i);
    planner::plan out;
    out.slot = ctx.slot;
    out.schedule = p.cfg.schedule;
    int given = 0;
    for (std::size_t k = 0; k < devs.size(); ++k) {
      int u = k + 1 == devs.size() ? units - given : std::max(1, static_cast<int>(units * p.speed(devs[k]) / total + 0.5));
      u = std::min(u, units - given - static_cast<int>(devs.size() - k - 1));
      given += u;
      out.groups.push_back({{p.cluster.devices[devs[k]].id}, {0, p.num_layers()}, u * q, p.cfg.micro_batch});
    }
    return out;
  }
};

}  // namespace

int main() {
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};

  model::set_threads(1);
  auto m = model::make_model("mlp", 1);
  if (!m) return std::fprintf(stderr, "%s\n", m.err().message.c_str()), 1;
  const auto train_data = data::synthetic(2000, 1);
  const model::optimizer_config opt{"adam", 1e-3, 0.9, 0};
  auto profile = model::measure_profile(**m, 16, 2, opt);
  if (!profile) return std::fprintf(stderr, "%s\n", profile.err().message.c_str()), 1;

  // Three emulated devices at relative speeds 0.6, 0.3 and 0.15 (of this machine); device 0
  // slows to a sixth of its speed from slot 3 on: the policy must notice from measurements.
  const double speeds[] = {0.6, 0.3, 0.15};
  sim::scenario cluster;
  for (int id = 0; id < 3; ++id) {
    planner::device_spec d;
    d.id = id;
    d.speed = speeds[id];
    d.node = 0;
    d.memory_bytes = 1e9;
    cluster.cluster.devices.push_back(d);
  }
  cluster.traces.push_back({0, {{3, 1.0 / 6}}, {}, {}});

  training::control_settings cc;
  cc.custom = std::make_shared<fastest_pair>();
  cc.core.profile = *profile;
  cc.core.cluster = cluster.cluster;
  cc.core.planner.batch = 64;
  cc.core.planner.micro_batch = 16;
  cc.core.planner.share_quantum = 16;

  // The cluster, spawned from code in this actor system.
  actors::actor_cluster cluster_actors;
  cluster_actors.controller = actors::start_controller(sys, cc);
  for (int id = 0; id < 3; ++id) cluster_actors.devices[id] = actors::start_device(sys, {id, opt, speeds[id]});

  training::train_settings s;
  s.emulated = cluster;
  s.slot_steps = 4;  // the controller re-plans every 4 steps
  s.steps = 40;
  s.batch = 64;
  s.optimizer = opt;
  s.profile = *profile;
  training::train_callbacks cb;
  cb.on_plan = [](const training::plan_record& r) {
    std::printf("step %3lld: %s\n    because: %s\n", static_cast<long long>(r.step), planner::describe(r.plan).c_str(),
                r.reason.c_str());
  };
  auto out = actors::train(sys, cluster_actors, **m, train_data, s, cb);
  if (!out) return std::fprintf(stderr, "training failed: %s\n", out.err().message.c_str()), 1;

  model::reference ref(**m, opt);
  data::global_sampler sampler(train_data.size(), s.batch, s.seed);
  for (int t = 0; t < s.steps; ++t) ref.step(train_data, sampler.step_samples(t), 16);
  const double diff = model::max_rel_diff(out->final_layers, ref.layers());
  std::printf("%lld steps, %d re-plans, %.0f samples/s; difference from one plain device: %g\n",
              static_cast<long long>(out->steps), out->replans, out->samples_per_s, diff);
  return diff == 0 ? 0 : 1;
}
