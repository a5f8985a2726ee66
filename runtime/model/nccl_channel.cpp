// The NCCL backend of model::channel: GPU tensors, one rank per communicator and process
// (several processes, or one rank alone). Built with NCCL and the CUDA runtime where CMake
// finds them (DYNAPAR_HAVE_NCCL); elsewhere the factory says so. Work runs on the legacy
// default stream, which LibTorch's kernels also use unless told otherwise, so a collective
// is ordered after the kernels that produced its input; each call waits for its own end.
#include "model/channel.hpp"

#include <cstring>

#include "model/boxes.hpp"

#ifdef DYNAPAR_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace dynapar::model {

#ifdef DYNAPAR_HAVE_NCCL
namespace {

status nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return ok_status();
  return make_error("nccl", std::string(what) + ": " + ncclGetErrorString(r));
}
status cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ok_status();
  return make_error("cuda", std::string(what) + ": " + cudaGetErrorString(e));
}

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
