// LibTorch's own collective backend (c10d ProcessGroupGloo): the sums of `exact: false` jobs
// among each layer's holders (docs/RUNTIME.md, "Where a step's gradients are added"), and
// `dynapar bench sum`'s reference. Built when Debian's libgloo-dev headers are found;
// otherwise every call is an error that says so.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "model/api.hpp"

namespace dynapar::model {

bool have_gloo();

// What starts the error of a failed all-reduce (a peer's process went away or was cut off):
// it reaches the driver as text, through device actors and nodes, and marks a broken
// communicator that the next generation replaces (actors/driver_faults.cpp).
inline constexpr const char* gloo_failure = "Gloo's all-reduce: ";
// Whether `why` is such a failure, wherever on its way it was prefixed (by device or node).
inline bool is_gloo_failure(const error& why) { return why.message.find(gloo_failure) != std::string::npos; }

// The rendezvous a Gloo group meets at: a c10d TCPStore server on `host`, any free port.
// The controller hosts one for the run.
class gloo_store {
 public:
  virtual ~gloo_store() = default;
  virtual std::string endpoint() const = 0;  // HOST:PORT
};
result<std::unique_ptr<gloo_store>> start_gloo_store(const std::string& host);

// A holder's partial sums of one layer added into one flat buffer of its own (a copy, so
// that the all-reduce may run off the device's thread while the device goes on), with the
// gradients' shapes to cut the sum back into.
struct flat_grads {
  tensor flat;
  std::vector<tensor> like;
};
result<flat_grads> flatten(const std::vector<grad_part>& mine);

// One rank of a Gloo group of `size` (its name keeps groups apart in the store), its own
// address `host` for the ring's connections. Joining waits, up to `timeout_s`, for every
// rank; so does each all-reduce.
class gloo_group {
 public:
  virtual ~gloo_group() = default;
  // The sum over the ranks, in the ring's order (not a fixed one: `exact: false`), shaped
  // like the gradients.
  virtual result<std::vector<tensor>> all_reduce(const flat_grads& g) = 0;
};
result<std::unique_ptr<gloo_group>> join_gloo_group(const std::string& store, const std::string& name, const std::string& host, int rank,
                                                    int size, double timeout_s);

// Joins a Gloo group of `world` processes (rendezvous through a FileStore at `store_file`,
// transport over loopback TCP) and all-reduces (sums) a float32 tensor of `floats` elements
// `iters` times after 3 warm-up rounds. Returns each round's seconds, and checks the sum.
result<std::vector<double>> gloo_allreduce_times(const std::string& store_file, int rank, int world, std::size_t floats,
                                                 int iters);

}  // namespace dynapar::model
