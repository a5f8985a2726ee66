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
// `outline`: the model is an outline (model::make_model), for a process that holds no layer
// itself (the controller of a run over nodes).
result<prepared_job> prepare_job(const std::string& path, std::int64_t steps, const std::string& place = "", bool outline = false);

// The largest frame a controller takes from its peers (ZMQ_MAXMSGSIZE; a larger one
// disconnects its sender before it is read). A run sends one tensor a frame: at most the
// model's parameters flattened (a bucket of the holders' sum; a layer and its optimizer state
// go tensor by tensor), or one layer's activations, gradients or inputs for a whole batch.
// Twice the larger, plus 16 MiB for what the profile leaves out, at most 1 GiB.
std::int64_t frame_cap_bytes(const planner::model_profile& m, int batch, double sample_bytes);
// The same for a prepared job (its profile, batch and samples).
std::int64_t frame_cap_bytes(const prepared_job& p);

}  // namespace dynapar::training
