// A job file (docs/FORMATS.md) turned into what a run needs: data, a model, its measured
// profile, the emulated cluster and the run's settings (`dynapar train`, `controller`,
// `launch` and `bench runtime` all start here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.hpp"
#include "model/api.hpp"
#include "training/settings.hpp"
#include "config/job_file.hpp"

namespace dynapar::training {

struct prepared_job {
  config::job job;
  data::dataset train_set, test_set;
  std::shared_ptr<const model::model_chain> model;
  planner::model_profile profile;          // measured here at start-up
  planner::cluster_state cluster;          // the job's devices at their emulated speeds
  double scale = 1;                        // the fastest device's speed relative to this machine
  train_settings settings;                 // a controller when replan_every > 0, else the policy's plan
  // Where --verify's plain device computes: the devices' place when they share one, else the
  // first GPU's (docs/GPU.md: where the run then equals it bit for bit, and where not).
  std::string reference_place = "cpu";
};

// `steps` > 0 overrides the job's length; a non-empty `place` puts every device there (and
// turns emulation off: the devices compute at their real speed).
result<prepared_job> prepare_job(const std::string& path, std::int64_t steps, const std::string& place = "");

}  // namespace dynapar::training
