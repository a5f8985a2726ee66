// Checkpoint directories (docs/RELIABILITY.md): DIR/step-N/{layers.pt,state.json} and
// DIR/latest naming the newest. Each is written under a temporary name and renamed, so a
// crash at any moment leaves the previous checkpoint whole. Writes happen on a background
// thread, one at a time, so training does not wait for the disk.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "training/settings.hpp"

namespace dynapar::training {

class checkpoint_writer {
 public:
  checkpoint_writer(std::string dir, std::string job) : dir_(std::move(dir)), job_(std::move(job)) {}
  ~checkpoint_writer() { finish(); }
  void write(checkpoint c);  // returns at once; waits for the previous write first
  status finish();                    // waits for the last write; its error, if any

 private:
  std::string dir_, job_;
  std::thread writer_;
  std::shared_ptr<status> last_ = std::make_shared<status>(ok_status());
};

// The newest checkpoint in `dir`, checked against the job (name and model).
result<checkpoint> load_checkpoint(const std::string& dir, const std::string& job, const model::model_chain& m);

}  // namespace dynapar::training
