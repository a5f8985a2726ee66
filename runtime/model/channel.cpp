// The exact ordered sum over any channel, and the in-process backend.
#include "model/channel.hpp"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

#include "model/boxes.hpp"

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

}  // namespace dynapar::model
