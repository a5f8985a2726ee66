// What the actor training tests share: a two-group plan and the single-device reference.
#pragma once

#include <vector>

#include "data/sampler.hpp"
#include "model/api.hpp"
#include "planner/plan.hpp"
#include "training/settings.hpp"

namespace dynapar::test {

// Group 0: two stages; group 1: three stages. Shares 40 and 24 of 64.
inline planner::plan two_groups(int layers, planner::schedule_kind kind) {
  planner::plan p;
  p.schedule = kind;
  const std::vector<int> two = layers == 3 ? std::vector<int>{0, 2, 3} : std::vector<int>{0, 2, 4};
  const std::vector<int> three = layers == 3 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 1, 3, 4};
  p.groups.push_back({{0, 1}, two, 40, 8});
  p.groups.push_back({{2, 3, 4}, three, 24, 8});
  return p;
}

// The short CNN runs' settings: two_groups under 1F1B, batch 64, Adam at a rate that moves
// the weights visibly in a few steps.
inline training::train_settings short_adam_run(int layers, std::int64_t steps) {
  training::train_settings s;
  s.plan = two_groups(layers, planner::schedule_kind::one_f_one_b);
  s.steps = steps;
  s.batch = 64;
  s.seed = 5;
  s.optimizer = {"adam", 0.05, 0.9, 0};
  return s;
}

// The independent reference: the same steps on one plain device, accumulating micro-batches
// of `micro` samples.
inline double diff_from_one_device(const model::model_chain& m, const data::dataset& d, const training::train_settings& s,
                            const std::vector<model::layer_copy>& trained, int micro = 8) {
  model::reference ref(m, s.optimizer);
  data::global_sampler sampler(d.size(), s.batch, s.seed);
  for (int t = 0; t < s.steps; ++t) ref.step(d, sampler.step_samples(t), micro);
  return model::max_rel_diff(trained, ref.layers());
}

}  // namespace dynapar::test
