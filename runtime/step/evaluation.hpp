// How an evaluation is dealt to the groups (issue 50), as pure code: the validation set in
// chunks (model::evaluation_chunk samples: each output has its bits whatever the dealing),
// each group a contiguous run of chunks in proportion to its share of the batch (the plan
// weighed the groups' speeds), sent a few chunks a task.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace dynapar::step {

class evaluation_deal {
 public:
  // `samples` in chunks of `chunk`; shares: each group's share of the batch; `per_task`
  // chunks a task: enough to keep a pipeline's stages busy, few enough that a task's inputs
  // stay small where they travel as tensors.
  evaluation_deal(int samples, int chunk, const std::vector<double>& shares, int per_task = 32);
  // Group g's next task: its chunks' sample ids, a list a chunk; none once its run is dealt.
  std::vector<std::vector<int>> next(std::size_t g);
  // The chunks [first, end) dealt to group g.
  std::pair<int, int> run(std::size_t g) const { return {first_[g], end_[g]}; }

 private:
  int samples_, chunk_, per_task_;
  std::vector<int> first_, next_, end_;
};

}  // namespace dynapar::step
