// --verify: the job again on one plain device, whose parameters the run's must equal.
#pragma once

#include <cstdint>
#include <vector>

#include "model/api.hpp"
#include "training/prepare.hpp"

namespace dynapar::training {

struct reference_check {
  double max_rel_diff = 0;       // the run's parameters against the plain device's (max relative)
  double reference_accuracy = 0; // the plain device's on the job's test set
  double tolerance = 0;          // the job's verify_tolerance
  // NaN compares false: a run that diverged to NaN fails.
  bool verified() const { return max_rel_diff <= tolerance; }
};

// The job's first `steps` steps on one plain device (model::reference) on the job's reference
// place: the same samples in the same order and, for an exact job, the same fixed
// micro-batches every group accumulates over.
reference_check check_against_reference(const prepared_job& p, std::int64_t steps, const std::vector<model::layer_copy>& trained);

}  // namespace dynapar::training
