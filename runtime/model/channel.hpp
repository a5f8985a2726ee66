// One rank's end of a communicator for tensors (c10d's ProcessGroup shape, narrowed to what
// dynapar's data plane needs): point-to-point sends and receives and a sum across ranks.
// Backends: in-process (threads of one process; tests the multi-rank logic on CPUs), ZeroMQ
// (processes, CPU tensors) and NCCL (GPU tensors, one rank per communicator and process).
// docs/GPU.md, docs/DISTRIBUTED.md.
#pragma once

#include <functional>
#include <memory>
#include <string>
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

// The exact sum, decentralised: each rank holds some complete nodes of the exact sum's tree
// over `micro_batches` leaves (its partial sums; docs/MODEL.md, "The exact sum"), each part
// one flat tensor of the same shape and type (a bucket of gradients). Rank r owns the r-th
// of `size` contiguous chunks of the elements: every rank sends each owner its parts' slices
// of that chunk, the owner evaluates the tree on its chunk, and every owner sends its summed
// chunk to every rank (a reduce-scatter and an all-gather: each rank sends and receives about
// 2 x the tensor per step, as a ring all-reduce does, whatever the number of ranks). `out`
// receives the whole sum on every rank, bit-identical to the tree evaluated in one place.
// Every rank must call it with the same micro_batches and shape; a rank may hold no parts.
status tree_all_reduce(channel& c, std::vector<grad_part> parts, std::int64_t micro_batches, const tensor& out);

// Ranks in several processes over ZeroMQ (TCP or IPC): this rank binds `bind` (a port 0 is
// chosen by the system), `exchange` publishes the endpoint it got and returns every rank's,
// in rank order. Tensors travel as raw bytes, sent without a copy (a sent tensor's storage
// must not change until its peer has it: tree_all_reduce's protocol ensures that for its own
// sends, since every peer needs them before it can answer); a receive waits at most
// `timeout_ms` for the peer and says which one is late.
result<std::unique_ptr<channel>> make_zmq_channel(int rank, int size, const std::string& bind,
                                                  const std::function<result<std::vector<std::string>>(const std::string&)>& exchange,
                                                  int timeout_ms = 60000);

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
