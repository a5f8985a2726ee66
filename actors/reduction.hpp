// A step's gradient sum, seen from the driver (c10d's ProcessGroup and Work, narrowed to what
// the driver does): start() begins a step's sums; the driver tells the work each device whose
// stage has finished the step's backward (ready()), and the sums a device takes part in are
// put in flight as soon as it can (overlapped with the other stages' backward); the driver
// hands the work every reply it receives until done(); then apply() has every holder take its
// layer's sum / batch and says how many acks to wait for. Two implementations give
// the same bits (docs/RUNTIME.md, "Where a step's gradients are added"):
// - central: every holder's partial sums travel to the driver, which adds them in the exact
//   sum's tree (model::tree_sum; exact: false, model::holders_sum) and sends the sums back;
// - peer: the holders add among themselves (model::peer_sum, node to node between
//   processes; exact: false with a Gloo rendezvous, c10d's ring all-reduce), answer once they
//   hold the sum, and apply it when the driver commits.
// Nothing is applied before apply(): a failure before it leaves no holder ahead.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/device_actor.hpp"
#include "planner/buckets.hpp"
#include "common/result.hpp"

namespace dynapar::actors {

struct reduction_step {
  std::int64_t tag = 0;                      // the attempt's (stale replies are told apart)
  std::int64_t micro_batches = 0;            // the exact sum's leaves: every group's, in order
  const std::map<int, std::vector<int>>* holders = nullptr;  // layer -> device ids, plan order
  std::int64_t generation = 0;               // reduce_task::generation
  // > 0 (clipping by global norm): norms() gives every layer's gradient norms at this divisor.
  double norms_divisor = 0;
};

class reduction_work {
 public:
  virtual ~reduction_work() = default;
  // `device` finished its stage of the step: its partial sums are final. Once for each
  // holder; a device that holds nothing is ignored.
  virtual void ready(int device) = 0;
  // Replies from the holders; a reply the implementation does not use, or of another
  // attempt, is ignored.
  virtual void on(device_gradients& g) = 0;
  virtual void on(const sum_held& h) = 0;
  // Every holder was ready and every reply is in; an error when the replies cannot be added
  // (named by layer).
  virtual bool done() const = 0;
  virtual status finish() = 0;
  // After finish(), with reduction_step::norms_divisor > 0: each layer's gradient norms
  // (model::grad_norms of its sum at that divisor, all its gradients), by layer.
  virtual std::map<int, std::vector<float>> norms() const = 0;
  // After finish(): every holder applies its layer's sum divided by `batch`, times `scale`
  // (clipping's). Returns the acks (one `applied` per holder and bucket) to wait for.
  virtual int apply(double batch, double scale) = 0;
  // The layers one `applied` confirms, by the layer it names (none listed: that layer alone).
  virtual std::map<int, std::vector<int>> buckets() const { return {}; }
};

class gradient_reduction {
 public:
  virtual ~gradient_reduction() = default;
  virtual std::unique_ptr<reduction_work> start(const reduction_step& s) = 0;
};

// `self` sends the requests and receives the replies; `devices` resolves device ids.
std::unique_ptr<gradient_reduction> central_reduction(caf::scoped_actor& self, const std::map<int, device_handle>& devices, bool exact);
struct peer_options {
  // HOST:PORT (exact: false only): the holders add through Gloo, meeting there.
  std::string gloo_store;
  // Every task goes out when the step starts, and each holder begins once its own stage of
  // the step has ended (the device waits for that); otherwise a bucket's task goes out once
  // the driver has heard that all its holders are ready. Starting at once takes the stage
  // report's way to the driver and the task's way back off the step.
  bool at_start = false;
  // Buckets (layers added in one exchange) by the time model's rule (planner/buckets.hpp):
  // each run of consecutive layers with the same holders, from its top layer down, a bucket
  // closing once its parameters reach `bucket_bytes` (0: the whole run in one), so that a
  // large model's exchanges overlap each other's adding; `layer_bytes` by layer.
  std::size_t bucket_bytes = 0;
  std::vector<std::size_t> layer_bytes;
};
// The buckets of a step's holders (layer -> device ids), lowest layer first.
std::vector<planner::layer_span> bucket_layers(const std::map<int, std::vector<int>>& holders, const peer_options& o);
std::unique_ptr<gradient_reduction> peer_reduction(caf::scoped_actor& self, const std::map<int, device_handle>& devices, bool exact,
                                                   const peer_options& o = {});

}  // namespace dynapar::actors
