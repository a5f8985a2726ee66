// A device's Gloo communicators for the sums of `exact: false` jobs: one per holder set and
// generation (reduce_task::generation), each joined and used on its own serial lane, so that
// every holder issues a set's all-reduces in the order the driver sent them (layer order)
// and the device's thread never blocks on a peer. A newer generation retires the older
// lanes: a communicator that saw a failure is never used again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/serial_lane.hpp"
#include "model/collective.hpp"

namespace dynapar::actors {

class gloo_lanes {
 public:
  using done_fn = std::function<void(result<std::vector<model::tensor>>)>;
  // `host`: the address this device's ring connections use; `timeout_s`: for joining and for
  // each all-reduce (a dead peer ends them with an error then).
  gloo_lanes(std::string host, double timeout_s) : host_(std::move(host)), timeout_s_(timeout_s) {}
  // The all-reduce of `g` among `holders` (this device is holders[rank]); `done` runs on the
  // lane's thread with the sum or the error.
  void start(const std::string& store, std::int64_t generation, const std::vector<int>& holders, int rank, model::flat_grads g, done_fn done);

 private:
  struct lane {
    std::shared_ptr<result<std::unique_ptr<model::gloo_group>>> group;  // joined on the lane
    std::unique_ptr<serial_lane> thread;
  };
  std::string host_;
  double timeout_s_;
  std::int64_t generation_ = -1;
  std::map<std::string, lane> lanes_;                  // by communicator name
  std::vector<std::unique_ptr<serial_lane>> retired_;  // closed, still running what they were given
};

}  // namespace dynapar::actors
