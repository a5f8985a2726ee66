#include "training/verify.hpp"

#include "data/sampler.hpp"

namespace dynapar::training {

reference_check check_against_reference(const prepared_job& p, std::int64_t steps, const std::vector<model::layer_copy>& trained) {
  model::reference ref(*p.model, p.settings.optimizer, p.reference_place);
  data::global_sampler sampler(p.train_set.size(), p.settings.batch, p.job.seed);
  const int micro = p.job.exact ? p.job.cluster.planner.micro_batch : 0;
  for (std::int64_t t = 0; t < steps; ++t) ref.step(p.train_set, sampler.step_samples(t), micro, t);
  reference_check out;
  out.max_rel_diff = model::max_rel_diff(trained, ref.layers());
  out.reference_accuracy = model::accuracy(ref.layers(), p.test_set);
  out.tolerance = p.job.verify_tolerance;
  return out;
}

}  // namespace dynapar::training
