// A run's records as the files `dynapar train` writes (docs/FORMATS.md): one JSON object per
// line of metrics.jsonl (steps and faults, told apart by "event") and plans.jsonl, and the
// fields of summary.json that describe the run itself.
#pragma once

#include <nlohmann/json.hpp>

#include "config/job_file.hpp"
#include "data/dataset.hpp"
#include "training/records.hpp"

namespace dynapar::training {

nlohmann::json step_json(const step_record& r);
nlohmann::json plan_json(const plan_record& r);
nlohmann::json fault_json(const fault_record& r);

// What summary.json says beside the outcome: measured by the caller.
struct run_facts {
  planner::plan first_plan;       // the plan at step 0
  double test_accuracy = 0;       // of the final layers: model::accuracy, which is
  std::string test_metric = "accuracy";  // model::metric_name: "accuracy", or a regression's "mse"
  double emulation_scale = 1;     // prepared_job::scale
  double wall_s = 0;
  // The training set's reads in this process (one process; over nodes each node reads its
  // own): from what was decoded ahead of their step (data/read_ahead.hpp), decoded when read,
  // and the seconds reads spent decoding or waiting.
  data::sample_store::read_figures data_reads;
};

// summary.json without --verify's and --compare's fields (the caller adds those).
nlohmann::json summary_json(const config::job& j, int batch, const train_outcome& o, const run_facts& f);

}  // namespace dynapar::training
