// --verify: the job again on one plain device, whose parameters the run's must equal.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/api.hpp"
#include "training/prepare.hpp"
#include "training/records.hpp"

namespace dynapar::training {

struct reference_check {
  double max_rel_diff = 0;       // the run's parameters against the plain device's (max relative)
  double reference_accuracy = 0; // the plain device's on the job's test set
  double tolerance = 0;          // the job's verify_tolerance
  // Every replica on the reference's place, each whole state's hash against the plain
  // device's (an exact job with no tolerance): how many were compared, and those that differ
  // ("layer L (NAME) on device D").
  int replicas_checked = 0;
  std::vector<std::string> replicas_differing;
  // NaN compares false: a run that diverged to NaN fails.
  bool verified() const { return max_rel_diff <= tolerance && replicas_differing.empty(); }
};

// The job's first `steps` steps on one plain device (model::reference) on the job's reference
// place: the same samples in the same order and, for an exact job, the same fixed
// micro-batches every group accumulates over.
// `trained`: one replica of each layer, compared value by value; `replicas`: every replica's
// hash (train_outcome::replica_hashes).
reference_check check_against_reference(const prepared_job& p, std::int64_t steps, const std::vector<model::layer_copy>& trained,
                                        const std::vector<std::vector<train_outcome::replica_hash>>& replicas = {});

// --verify-against DIR: a model too large for one device is checked against a second run of
// the same job under another plan instead. Every run writes OUT/layer_hashes.json: the job's
// fingerprint (checkpoint_files.hpp), its steps and each layer's model::state_hashes. An
// exact job's layers are the same bits under any plan, so the two runs' hashes must be equal.
inline constexpr const char* layer_hashes_file = "layer_hashes.json";
// `hashes`: train_outcome::final_hashes.
nlohmann::json layer_hashes_json(const prepared_job& p, std::int64_t steps, const std::vector<std::uint64_t>& hashes);
// The other run's file, read before this run trains: refused (bad_verify, naming what) when
// it is missing or unreadable, when this job is not exact, or when the other run trained
// another job (fingerprint) or another number of steps.
result<nlohmann::json> other_run(const std::string& dir, const prepared_job& p, std::int64_t steps);
// The layers whose hashes differ between the two files (empty: bit for bit the same).
std::vector<int> layers_differing(const nlohmann::json& mine, const nlohmann::json& other);

}  // namespace dynapar::training
