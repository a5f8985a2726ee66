// The exact ordered sum over any channel, the in-process backend, and the NCCL backend: GPU
// tensors, one rank per communicator and process (several processes, or one rank alone),
// built with NCCL and the CUDA runtime where CMake finds them (DYNAPAR_HAVE_NCCL; elsewhere
// the factory says so). NCCL work runs on the legacy default stream, which LibTorch's kernels
// also use unless told otherwise, so a collective is ordered after the kernels that produced
// its input; each call waits for its own end. One translation unit: each LibTorch one costs
// ~30 s of CI's cold build.
#include "model/channel.hpp"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "model/boxes.hpp"
#include "schedule/reduction_tree.hpp"

#ifdef DYNAPAR_HAVE_NCCL
#include "comm/nccl_status.hpp"
#endif

namespace dynapar::model {

status ordered_sum(channel& c, const tensor& t) {
  if (!t) return make_error("bad_tensor", "ordered_sum of no tensor");
  if (c.size() == 1) return ok_status();
  if (c.rank() != 0) {
    if (auto st = c.send(t, 0); !st) return st;
    return c.recv(t, 0);
  }
  auto part = box(torch::empty_like(t->t));
  for (int r = 1; r < c.size(); ++r) {
    if (auto st = c.recv(part, r); !st) return st;
    t->t.add_(part->t);
  }
  for (int r = 1; r < c.size(); ++r)
    if (auto st = c.send(t, r); !st) return st;
  return ok_status();
}

status tree_all_reduce(channel& c, std::vector<grad_part> parts, std::int64_t micro_batches, const tensor& out) {
  if (!out || !out->t.is_contiguous()) return make_error("bad_tensor", "tree_all_reduce needs a contiguous output tensor");
  const int P = c.size(), r = c.rank();
  const auto numel = out->t.numel();
  for (const auto& p : parts)
    if (p.grads.size() != 1 || !p.grads[0] || p.grads[0]->t.numel() != numel || p.grads[0]->t.scalar_type() != out->t.scalar_type())
      return make_error("bad_tensor", "tree_all_reduce: each part must be one tensor of the output's size and type");
  auto flat = [&](const tensor& t) { return t->t.contiguous().view({-1}); };
  auto chunk = [&](const torch::Tensor& t, int k) { return t.slice(0, numel * k / P, numel * (k + 1) / P); };
  // Which nodes each rank holds: a count, then (level, index) pairs (int64 tensors).
  std::vector<std::vector<schedule::tree_node>> nodes(P);
  auto mine = torch::empty({static_cast<std::int64_t>(2 * parts.size())}, torch::kInt64);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    mine[2 * i] = parts[i].level;
    mine[2 * i + 1] = parts[i].index;
    nodes[r].push_back({parts[i].level, parts[i].index});
  }
  const auto ints = torch::TensorOptions(torch::kInt64).device(out->t.device());
  auto mine_box = box(mine.to(out->t.device()));
  auto count_out = box(torch::full({1}, static_cast<std::int64_t>(parts.size()), ints));
  for (int k = 1; k < P; ++k) {
    const int to = (r + k) % P, from = (r - k + P) % P;
    auto count_in = box(torch::empty({1}, ints));
    if (auto st = c.send_recv(count_out, to, count_in, from); !st) return st;
    const auto n = count_in->t.to(torch::kCPU).item<std::int64_t>();
    if (n < 0 || n > 128) return make_error("bad_sum", "rank " + std::to_string(from) + " announced " + std::to_string(n) + " partial sums");
    auto in = box(torch::empty({2 * n}, ints));
    if (auto st = c.send_recv(mine_box, to, in, from); !st) return st;
    const auto got = in->t.to(torch::kCPU);
    const auto* v = got.data_ptr<std::int64_t>();
    // Indices are checked by the tree's evaluation; a level is checked here, before it narrows.
    for (std::int64_t i = 0; i < n; ++i) {
      if (v[2 * i] < 0 || v[2 * i] > 62) return make_error("bad_sum", "rank " + std::to_string(from) + " sent a partial sum at level " + std::to_string(v[2 * i]));
      nodes[from].push_back({static_cast<int>(v[2 * i]), v[2 * i + 1]});
    }
  }
  // Reduce-scatter: my chunk of every rank's parts, then the tree on it. Every buffer here is
  // this call's own (my parts' slices are copied), so the tree adds in place.
  std::vector<std::pair<schedule::tree_node, torch::Tensor>> on_chunk;
  for (std::size_t i = 0; i < parts.size(); ++i)
    on_chunk.emplace_back(schedule::tree_node{parts[i].level, parts[i].index}, chunk(flat(parts[i].grads[0]), r).clone());
  for (int k = 1; k < P; ++k) {
    const int to = (r + k) % P, from = (r - k + P) % P;
    // In pairs, so that a backend whose sends wait for the receiver (NCCL) cannot deadlock:
    // my parts' slices of `to`'s chunk go out as `from`'s slices of mine come in.
    const std::size_t sends = parts.size(), recvs = nodes[from].size();
    for (std::size_t i = 0; i < std::max(sends, recvs); ++i) {
      tensor part = i < sends ? box(chunk(flat(parts[i].grads[0]), to).contiguous()) : nullptr;
      tensor into = i < recvs ? box(torch::empty_like(chunk(out->t.view({-1}), r))) : nullptr;
      status st = part && into ? c.send_recv(part, to, into, from) : part ? c.send(part, to) : c.recv(into, from);
      if (!st) return st;
      if (into) on_chunk.emplace_back(nodes[from][i], into->t);
    }
  }
  auto summed = schedule::evaluate_tree(std::move(on_chunk), micro_batches, [](torch::Tensor a, const torch::Tensor& b) { return a.add_(b); });
  if (!summed) return summed.err();
  auto whole = out->t.view({-1});
  chunk(whole, r).copy_(*summed);
  // All-gather: every owner's summed chunk to every rank.
  auto my_chunk = box(chunk(whole, r).contiguous());
  for (int k = 1; k < P; ++k) {
    const int to = (r + k) % P, from = (r - k + P) % P;
    // Straight into its place (a slice of a flat contiguous tensor is contiguous).
    if (auto st = c.send_recv(my_chunk, to, box(chunk(whole, from)), from); !st) return st;
  }
  return ok_status();
}

tensor tensor_of(const std::vector<float>& values, const std::string& place) {
  return box(torch::tensor(values, torch::kFloat32).to(device_of(place)));
}

std::vector<float> values_of(const tensor& t) {
  auto c = t->t.to(torch::kCPU, torch::kFloat32).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

namespace {

// Mailboxes between the ranks of one process: (from, to) -> queued copies.
struct local_hub {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<torch::Tensor>> queues;
};

class local_channel final : public channel {
 public:
  local_channel(std::shared_ptr<local_hub> hub, int rank, int size) : hub_(std::move(hub)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  status send(const tensor& t, int peer) override {
    if (auto st = check_peer(peer); !st) return st;
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      hub_->queues[{rank_, peer}].push_back(t->t.clone());
    }
    hub_->cv.notify_all();
    return ok_status();
  }

  status recv(const tensor& into, int peer) override {
    if (auto st = check_peer(peer); !st) return st;
    std::unique_lock<std::mutex> lock(hub_->mu);
    auto& q = hub_->queues[{peer, rank_}];
    hub_->cv.wait(lock, [&] { return !q.empty(); });
    torch::Tensor got = std::move(q.front());
    q.pop_front();
    if (!got.sizes().equals(into->t.sizes()) || got.scalar_type() != into->t.scalar_type())
      return make_error("bad_tensor", "rank " + std::to_string(rank_) + " received a tensor of another shape or type from rank " +
                                          std::to_string(peer));
    into->t.copy_(got);
    return ok_status();
  }

  status send_recv(const tensor& out, int to, const tensor& into, int from) override {
    if (auto st = send(out, to); !st) return st;  // sends never block here
    return recv(into, from);
  }

  status all_reduce_sum(const tensor& t) override { return ordered_sum(*this, t); }

 private:
  status check_peer(int peer) const {
    if (peer < 0 || peer >= size_) return make_error("bad_rank", "no rank " + std::to_string(peer) + " of " + std::to_string(size_));
    return ok_status();
  }
  std::shared_ptr<local_hub> hub_;
  int rank_, size_;
};

}  // namespace

std::vector<std::unique_ptr<channel>> make_local_channels(int n) {
  auto hub = std::make_shared<local_hub>();
  std::vector<std::unique_ptr<channel>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<local_channel>(hub, r, n));
  return out;
}

#ifdef DYNAPAR_HAVE_NCCL
namespace {
using comm::cuda;
using comm::nccl;

result<ncclDataType_t> nccl_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return ncclFloat;
    case torch::kFloat64: return ncclDouble;
    case torch::kInt64: return ncclInt64;
    case torch::kInt32: return ncclInt32;
    case torch::kUInt8: return ncclUint8;
    default: return make_error("bad_tensor", "NCCL: unsupported element type");
  }
}

class nccl_channel final : public channel {
 public:
  nccl_channel(ncclComm_t comm, int rank, int size, int device) : comm_(comm), rank_(rank), size_(size), device_(device) {}
  ~nccl_channel() override {
    cudaSetDevice(device_);
    ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  status send(const tensor& t, int peer) override {
    return run("ncclSend", [&] { return one(t, peer, true); });
  }
  status recv(const tensor& into, int peer) override {
    return run("ncclRecv", [&] { return one(into, peer, false); });
  }
  status send_recv(const tensor& out, int to, const tensor& into, int from) override {
    return run("ncclSend/ncclRecv", [&]() -> status {
      if (auto st = nccl(ncclGroupStart(), "ncclGroupStart"); !st) return st;
      auto a = one(out, to, true);
      auto b = one(into, from, false);
      if (auto st = nccl(ncclGroupEnd(), "ncclGroupEnd"); !st) return st;
      return !a ? a : b;
    });
  }
  status all_reduce_sum(const tensor& t) override {
    return run("ncclAllReduce", [&]() -> status {
      auto type = check(t);
      if (!type) return type.err();
      void* p = t->t.data_ptr();
      return nccl(ncclAllReduce(p, p, static_cast<std::size_t>(t->t.numel()), *type, ncclSum, comm_, nullptr), "ncclAllReduce");
    });
  }

 private:
  // Queues the operation on the default stream, then waits for it.
  template <class F>
  status run(const char* what, F&& f) {
    if (auto st = cuda(cudaSetDevice(device_), "selecting the GPU"); !st) return st;
    if (auto st = f(); !st) return st;
    return cuda(cudaStreamSynchronize(nullptr), what);
  }
  result<ncclDataType_t> check(const tensor& t) const {
    if (!t || !t->t.is_cuda() || t->t.get_device() != device_ || !t->t.is_contiguous())
      return make_error("bad_tensor", "NCCL needs a contiguous tensor on cuda:" + std::to_string(device_));
    return nccl_type(t->t);
  }
  status one(const tensor& t, int peer, bool sending) {
    if (peer < 0 || peer >= size_) return make_error("bad_rank", "no rank " + std::to_string(peer) + " of " + std::to_string(size_));
    auto type = check(t);
    if (!type) return type.err();
    const auto n = static_cast<std::size_t>(t->t.numel());
    return sending ? nccl(ncclSend(t->t.data_ptr(), n, *type, peer, comm_, nullptr), "ncclSend")
                   : nccl(ncclRecv(t->t.data_ptr(), n, *type, peer, comm_, nullptr), "ncclRecv");
  }
  ncclComm_t comm_;
  int rank_, size_, device_;
};

}  // namespace

result<std::vector<char>> new_nccl_id() {
  ncclUniqueId id;
  if (auto st = nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"); !st) return st.err();
  return std::vector<char>(id.internal, id.internal + sizeof(id.internal));
}

result<std::unique_ptr<channel>> make_nccl_channel(const std::vector<char>& unique_id, int rank, int size, int cuda_device) {
  if (auto st = check_place("cuda:" + std::to_string(cuda_device)); !st) return st.err();
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) return make_error("bad_nccl_id", "an NCCL unique id has " + std::to_string(sizeof(id.internal)) + " bytes");
  if (rank < 0 || rank >= size) return make_error("bad_rank", "rank " + std::to_string(rank) + " of " + std::to_string(size));
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  if (auto st = cuda(cudaSetDevice(cuda_device), "selecting the GPU"); !st) return st.err();
  ncclComm_t comm = nullptr;
  if (auto st = nccl(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank"); !st) return st.err();
  return std::unique_ptr<channel>(std::make_unique<nccl_channel>(comm, rank, size, cuda_device));
}

#else

result<std::vector<char>> new_nccl_id() {
  return make_error("no_nccl", "built without NCCL (CMake found no nccl.h and libnccl; see DYNAPAR_WITH_NCCL)");
}
result<std::unique_ptr<channel>> make_nccl_channel(const std::vector<char>&, int, int, int) { return new_nccl_id().err(); }

#endif

}  // namespace dynapar::model
