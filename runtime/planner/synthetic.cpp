#include "planner/synthetic.hpp"

namespace dynapar::planner {

instance random_small_instance(rng& r, int max_devices) {
  instance in;
  const int layers = 6 + static_cast<int>(r.below(7));
  double total_params = 0;
  for (int l = 0; l < layers; ++l) {
    layer_profile lp;
    lp.name = "l" + std::to_string(l);
    lp.fwd_s = r.uniform(0.2e-3, 2e-3);
    lp.bwd_s = 2 * lp.fwd_s;
    lp.fixed_s = r.uniform(0, 0.5e-3);
    lp.act_bytes = r.uniform(0.05e6, 2e6);
    lp.param_bytes = r.uniform(5e6, 80e6);
    lp.act_mem_bytes = 2 * lp.act_bytes;
    total_params += lp.param_bytes;
    in.model.layers.push_back(lp);
  }
  in.model.name = "random";
  in.model.optimizer_state_factor = 1;
  const int n = 2 + static_cast<int>(r.below(static_cast<std::uint64_t>(max_devices - 1)));
  const double speeds[] = {1, 2, 4, 8};
  for (int i = 0; i < n; ++i) {
    device_spec d;
    d.id = i;
    d.name = "d" + std::to_string(i);
    d.speed = speeds[r.below(4)] * r.uniform(0.8, 1.2);
    // Between 0.6x and 3x of what the whole model with momentum needs: some must pipeline.
    d.memory_bytes = 2 * total_params * r.uniform(0.6, 3.0) + 200e6;
    d.price_per_s = d.speed * 1e-3;
    d.node = static_cast<int>(r.below(3));
    in.cluster.devices.push_back(d);
  }
  in.cluster.tiers.same_node = {r.uniform(20e9, 100e9), 5e-6};
  in.cluster.tiers.same_rack = {r.uniform(0.5e9, 5e9), 50e-6};
  in.cfg.batch = 32 * (1 + static_cast<int>(r.below(3)));
  in.cfg.micro_batch_candidates = {1, 2, 4, 8, 16};
  return in;
}

cluster_state synthetic_cluster(int n, rng& r) {
  cluster_state c;
  const double speed[] = {1, 2, 4, 8}, mem[] = {16e9, 24e9, 40e9, 80e9}, price[] = {0.5, 1.0, 2.0, 4.0};
  for (int i = 0; i < n; ++i) {
    const int node = i / 8;
    const int gen = static_cast<int>((node * 7 + r.below(2)) % 4);  // mostly one generation per node
    device_spec d;
    d.id = i;
    d.name = "gpu" + std::to_string(i);
    d.speed = speed[gen] * r.uniform(0.9, 1.1);
    d.memory_bytes = mem[gen];
    d.price_per_s = price[gen] / 3600;
    d.power_w = 150 + 100 * gen;
    d.node = node;
    d.rack = node / 4;
    c.devices.push_back(d);
  }
  return c;
}

}  // namespace dynapar::planner
