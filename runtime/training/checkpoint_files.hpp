// Checkpoint directories (docs/RELIABILITY.md, "Checkpoints"): DIR/step-N/ with the layers'
// shards (layer-L.pt, each written by a device that held it, where it was) or the gathered
// layers (layers.pt), and state.json, the manifest, written last; DIR/latest names the newest.
// Each is written under a temporary name (.step-N.tmp, where the holders write their shards),
// every file and directory synced to disk, then renamed, so a crash or a full disk at any
// moment leaves the previous checkpoint whole; state.json holds every file's SHA-256 and the
// job's fingerprint. Gathered layers are written on a background thread, one at a time, so
// training does not wait for the disk; shards are already on it and are committed at once.
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
  // Gathered layers: returns at once (ok), after the previous write. Shards (in
  // shard_dir(c.step)): committed before it returns, their paths then the committed ones.
  status write(checkpoint& c);
  // Where the holders write the shards of the checkpoint after `step` steps: an empty
  // .step-N.tmp directory, its absolute path ("" if it cannot be made: gather instead).
  std::string shard_dir(std::int64_t step) const;
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

// The newest complete checkpoint in `dir`: a damaged one (torn state.json, a file missing or not
// matching its hash, layers.pt not loadable) is passed over for the one before it. A
// checkpoint of another job, or of this job with another fingerprint, is refused by name.
// Shards are checked here and read where their layers are placed.
result<found_checkpoint> load_checkpoint(const std::string& dir, const std::string& job, const nlohmann::json& fingerprint,
                                         const model::model_chain& m);

}  // namespace dynapar::training
