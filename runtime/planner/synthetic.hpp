// Seeded synthetic problems: small random instances for oracle comparisons (tests and
// `dynapar bench planner`) and large heterogeneous clusters for scale runs. Pure.
#pragma once

#include "common/rng.hpp"
#include "planner/problem.hpp"

namespace dynapar::planner {

struct instance {
  model_profile model;
  cluster_state cluster;
  planner_config cfg;
};

// 2..max_devices devices of 1-8x speed spread, mixed memory (some too small for the whole
// model), 2-3 nodes with slower links between them, a 6-12 layer model, batch 32-96.
instance random_small_instance(rng& r, int max_devices);

// `n` devices of four GPU generations (speeds 1, 2, 4, 8 with memory 16-80 GB), 8 to a node
// and 4 nodes to a rack.
cluster_state synthetic_cluster(int n, rng& r);

}  // namespace dynapar::planner
