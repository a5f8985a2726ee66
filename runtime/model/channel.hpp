// One rank's end of a communicator for tensors (c10d's ProcessGroup shape, narrowed to what
// dynapar's data plane needs): point-to-point sends and receives and a sum across ranks.
// Backends: in-process (threads of one process; tests the multi-rank logic on CPUs) and NCCL
// (GPU tensors, one rank per communicator and process). docs/GPU.md.
#pragma once

#include <memory>
#include <vector>

#include "model/api.hpp"

namespace dynapar::model {

class channel {
 public:
  virtual ~channel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Blocking; `into` must already have the sender's shape and type (on the backend's device).
  virtual status send(const tensor& t, int peer) = 0;
  virtual status recv(const tensor& into, int peer) = 0;
  // Both at once (a rank can send to itself this way, and a ring step does not deadlock).
  virtual status send_recv(const tensor& out, int to, const tensor& into, int from) = 0;
  // In place, the sum over all ranks in the backend's own order (exact: false).
  virtual status all_reduce_sum(const tensor& t) = 0;
};

// The exact sum: ((t_0 + t_1) + t_2) + ... in rank order on rank 0, sent back to every
// rank, so that every rank holds the same bits a single device adding them in that order
// would (docs/GPU.md). In place.
status ordered_sum(channel& c, const tensor& t);

// `n` ranks in this process, one per thread; tensors are copied on send.
std::vector<std::unique_ptr<channel>> make_local_channels(int n);

// NCCL: one rank of `size` on CUDA device `cuda_device`, joined through `unique_id` (the bytes
// of an ncclUniqueId: new_nccl_id on one rank, handed to the others). Errors where dynapar
// was built without NCCL or no GPU is visible.
result<std::vector<char>> new_nccl_id();
result<std::unique_ptr<channel>> make_nccl_channel(const std::vector<char>& unique_id, int rank, int size, int cuda_device);

// Tests and tools: a float32 tensor of `values` on `place`, and its values back on the host.
tensor tensor_of(const std::vector<float>& values, const std::string& place);
std::vector<float> values_of(const tensor& t);

}  // namespace dynapar::model
