// Checkpoint directories (docs/RELIABILITY.md, "Checkpoints"): DIR/step-N/{layers.pt,state.json}
// and DIR/latest naming the newest. Each is written under a temporary name, every file and
// directory synced to disk, then renamed, so a crash or a full disk at any moment leaves the
// previous checkpoint whole; state.json holds the layers' SHA-256 and the job's fingerprint.
// Writes happen on a background thread, one at a time, so training does not wait for the disk.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "training/prepare.hpp"
#include "training/settings.hpp"

namespace dynapar::training {

// What decides a run's trained parameters, as {"field": value} with the job file's field names
// (model, data, batch, micro_batch, seed, exact, optimizer.*, loss.label_smoothing): a resume
// under a job that differs in any of them is refused, naming the field.
nlohmann::json job_fingerprint(const prepared_job& p);

struct checkpoint_options {
  std::string dir;
  std::string job;                  // the job's name
  nlohmann::json fingerprint;       // job_fingerprint (null: none written)
  int keep = 0;                     // the newest K complete checkpoints are kept (0: all)
};

class checkpoint_writer {
 public:
  explicit checkpoint_writer(checkpoint_options o) : o_(std::move(o)) {}
  ~checkpoint_writer() { finish(); }
  void write(checkpoint c);  // returns at once; waits for the previous write first
  // Waits for the last write. Its value: every write that failed ("step-N: why"), oldest
  // first; each was logged as it happened, and the checkpoint before it stays the newest.
  std::vector<std::string> finish();

 private:
  checkpoint_options o_;
  std::thread writer_;
  // Written by one writer thread at a time; read after joining it (no lock needed).
  std::shared_ptr<std::vector<std::string>> failed_ = std::make_shared<std::vector<std::string>>();
};

struct found_checkpoint {
  checkpoint at;
  std::vector<std::string> passed_over;  // newer ones that are damaged: "step-N: why", newest first
};

// The newest complete checkpoint in `dir`: a damaged one (torn state.json, layers.pt not
// matching its hash or not loadable) is passed over for the one before it. A checkpoint of
// another job, or of this job with another fingerprint, is refused by name.
result<found_checkpoint> load_checkpoint(const std::string& dir, const std::string& job, const nlohmann::json& fingerprint,
                                         const model::model_chain& m);

}  // namespace dynapar::training
