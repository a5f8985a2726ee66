// One device's side of the holders' sum (docs/DISTRIBUTED.md) as a state machine that owns
// its state (issue 72): the buckets in progress (each a model::peer_sum), chunks that came
// before their task, the sums held until the driver's commit, and the buckets in flight
// through Gloo (exact: false). Inputs in; out come the chunks to send, by the receiver's rank
// among the bucket's holders, and the bucket's answer once it ends. The device actor
// (actors/device_sum.cpp) only sends the chunks, runs Gloo's lanes and keeps its promises.
// No actors, no clock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/collective.hpp"
#include "model/peer_sum.hpp"

namespace dynapar::model {

// A bucket to sum: actors::reduce_task without the holders' handles.
struct sum_task {
  std::int64_t step = 0;           // the attempt's tag
  int layer = 0;                   // the bucket's name: its first layer
  std::vector<int> layers;         // every layer of the bucket, ascending; empty: `layer` alone
  std::vector<int> holders;        // device ids; a holder's rank is its position
  std::int64_t micro_batches = 0;  // the exact sum's leaves
  bool exact = true;               // false: the holders' sums in rank order
  double norms_divisor = 0;        // > 0: the answer carries the sum's gradient norms
};

// A bucket's end: held (the bytes of the other holders' chunks it took; each layer's
// gradient norms when asked), or why it failed.
struct sum_answer {
  std::int64_t step = 0;
  int layer = 0;
  std::string error;  // empty: the sum is held for the commit
  std::int64_t bytes_in = 0;
  std::vector<std::vector<float>> norms;
};

// What the device does after an input to bucket `layer` of attempt `step`.
struct sum_out {
  std::int64_t step = 0;
  int layer = 0;
  std::vector<chunk_send> sends;      // to holders by rank
  std::optional<sum_answer> answer;   // once the bucket ended
  std::vector<std::pair<int, int>> refused;  // chunks refused: (sending device, the rank it claimed)
};

class device_sums {
 public:
  // This device's partial sums of a layer, final once its stage of the step ended.
  using partials = std::function<std::vector<grad_part>(int layer)>;

  explicit device_sums(int device) : device_(device) {}

  // A bucket's sum among its holders. A task for a bucket still in progress, held or in
  // flight replaces it (an abandoned attempt's: dropped unanswered); earlier attempts' early
  // chunks go. Chunks that came before the task are taken now.
  sum_out start(const sum_task& t, const partials& mine);
  // Another holder's chunk: taken only from the device the bucket's holders list at the
  // rank it names; kept when it came before its task; dropped when of an abandoned attempt.
  sum_out take(std::int64_t step, int layer, int device, chunk_msg m);
  // exact: false through Gloo: the bucket's gradients flattened for the all-reduce, the wait
  // noted; an error is the bucket's answer.
  result<flat_grads> gloo_start(const sum_task& t, const partials& mine);
  // Gloo's result for a bucket: its answer (none when of an abandoned attempt).
  std::optional<sum_answer> gloo_done(std::int64_t step, int layer, const std::vector<tensor>& sum, const std::string& error);
  // The commit of bucket `layer` for attempt `step`: its held sum, cut back into its layers
  // (layer, summed gradients), and let go.
  result<std::vector<std::pair<int, std::vector<tensor>>>> commit(std::int64_t step, int layer);

 private:
  struct bucket {
    std::vector<int> layers;
    std::vector<std::size_t> counts;  // each layer's parameters, to cut the sum back
  };
  struct in_progress {
    sum_task task;
    bucket b;
    std::unique_ptr<peer_sum> sum;
    std::int64_t bytes_in = 0;  // of the other holders' chunks
  };
  struct held {
    std::int64_t step = 0;
    bucket b;
    std::vector<tensor> sum;
  };
  struct in_flight {  // through Gloo
    std::int64_t step = 0;
    bucket b;
    std::int64_t bytes_in = 0;  // what the ring brings this rank: 2 (P - 1) / P of the bucket
    double norms_divisor = 0;
  };

  void forget(const sum_task& t);
  result<std::vector<grad_part>> parts_of(const sum_task& t, const partials& mine, bucket& b) const;
  sum_answer held_answer(std::int64_t step, int layer, const bucket& b, const std::vector<tensor>& sum, std::int64_t bytes_in,
                         double norms_divisor) const;
  void progress(sum_out& out, result<std::vector<chunk_send>> sent);
  sum_answer failure(std::int64_t step, int layer, const std::string& why) const;

  int device_;
  std::map<int, in_progress> sums_;
  std::map<std::pair<std::int64_t, int>, std::vector<std::pair<int, chunk_msg>>> early_;  // (step, bucket): (sender, chunk)
  std::map<int, held> held_;
  std::map<int, in_flight> gloo_;
};

}  // namespace dynapar::model
