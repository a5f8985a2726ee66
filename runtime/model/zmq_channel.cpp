// The channel between processes over ZeroMQ: each rank binds one PULL socket and connects a
// PUSH socket to every other rank's. A message is [sender rank][raw bytes]; what arrives from
// a rank other than the one awaited is kept in that rank's mailbox, so receives may name their
// peer in any order. Sends are queued by ZeroMQ (no high-water mark) and never block: the
// collectives (tree_all_reduce) rely on it. CPU tensors only (GPUs use NCCL).
#include <zmq.hpp>

#include <chrono>
#include <cstring>
#include <deque>
#include <map>

#include "model/boxes.hpp"
#include "model/channel.hpp"

namespace dynapar::model {
namespace {

class zmq_channel final : public channel {
 public:
  zmq_channel(int rank, int size, int timeout_ms) : rank_(rank), size_(size), timeout_ms_(timeout_ms), in_(ctx_, zmq::socket_type::pull) {
    in_.set(zmq::sockopt::rcvhwm, 0);
    in_.set(zmq::sockopt::linger, 0);
  }

  status start(const std::string& bind, const std::function<result<std::vector<std::string>>(const std::string&)>& exchange) {
    try {
      in_.bind(bind);
      auto all = exchange(in_.get(zmq::sockopt::last_endpoint));
      if (!all) return all.err();
      if (static_cast<int>(all->size()) != size_)
        return make_error("bad_rank", "the endpoint exchange gave " + std::to_string(all->size()) + " endpoints for " + std::to_string(size_) + " ranks");
      for (int r = 0; r < size_; ++r) {
        out_.emplace_back(ctx_, zmq::socket_type::push);
        if (r == rank_) continue;
        out_.back().set(zmq::sockopt::sndhwm, 0);
        // Unsent data gets a few seconds at close, not forever (a peer may be gone).
        out_.back().set(zmq::sockopt::linger, 5000);
        out_.back().connect((*all)[static_cast<std::size_t>(r)]);
      }
    } catch (const zmq::error_t& e) {
      return make_error("zmq", "rank " + std::to_string(rank_) + ": " + e.what());
    }
    return ok_status();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  status send(const tensor& t, int peer) override {
    if (auto st = check(t, peer); !st) return st;
    if (peer == rank_) {
      zmq::message_t m(t->t.data_ptr(), static_cast<std::size_t>(t->t.nbytes()));
      mail_[peer].push_back(std::move(m));
      return ok_status();
    }
    // Without a copy: the message keeps the tensor alive until ZeroMQ has sent it.
    auto* keep = new torch::Tensor(t->t);
    zmq::message_t body(keep->data_ptr(), static_cast<std::size_t>(keep->nbytes()),
                        [](void*, void* hint) { delete static_cast<torch::Tensor*>(hint); }, keep);
    const std::int32_t me = rank_;
    try {
      auto& s = out_[static_cast<std::size_t>(peer)];
      s.send(zmq::buffer(&me, sizeof me), zmq::send_flags::sndmore);
      s.send(body, zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      return make_error("zmq", "rank " + std::to_string(rank_) + " sending to rank " + std::to_string(peer) + ": " + e.what());
    }
    return ok_status();
  }

  status recv(const tensor& into, int peer) override {
    if (auto st = check(into, peer); !st) return st;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
    while (mail_[peer].empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return make_error("timeout", "rank " + std::to_string(rank_) + " waited " + std::to_string(timeout_ms_) + " ms for rank " + std::to_string(peer));
      zmq::pollitem_t item{in_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, left);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t who, body;
      if (!in_.recv(who, zmq::recv_flags::none) || !who.more() || !in_.recv(body, zmq::recv_flags::none))
        return make_error("bad_frame", "rank " + std::to_string(rank_) + " received a message without its body");
      std::int32_t from = -1;
      if (who.size() == sizeof from) std::memcpy(&from, who.data(), sizeof from);
      if (from < 0 || from >= size_ || from == rank_ || body.more())
        return make_error("bad_frame", "rank " + std::to_string(rank_) + " received a message with a bad sender or framing");
      mail_[from].push_back(std::move(body));
    }
    zmq::message_t m = std::move(mail_[peer].front());
    mail_[peer].pop_front();
    if (m.size() != static_cast<std::size_t>(into->t.nbytes()))
      return make_error("bad_tensor", "rank " + std::to_string(rank_) + " received " + std::to_string(m.size()) + " bytes from rank " +
                                          std::to_string(peer) + ", expected " + std::to_string(into->t.nbytes()));
    std::memcpy(into->t.data_ptr(), m.data(), m.size());
    return ok_status();
  }

  status send_recv(const tensor& out, int to, const tensor& into, int from) override {
    if (auto st = send(out, to); !st) return st;
    return recv(into, from);
  }

  status all_reduce_sum(const tensor& t) override {
    // Ranks as the tree's leaves: decentralised and exact.
    auto copy = box(t->t.contiguous().clone());
    return tree_all_reduce(*this, {grad_part{0, rank_, {copy}}}, size_, t);
  }

 private:
  status check(const tensor& t, int peer) const {
    if (peer < 0 || peer >= size_) return make_error("bad_rank", "no rank " + std::to_string(peer) + " of " + std::to_string(size_));
    if (!t || t->t.is_cuda() || !t->t.is_contiguous()) return make_error("bad_tensor", "the ZeroMQ channel needs contiguous CPU tensors");
    return ok_status();
  }
  int rank_, size_, timeout_ms_;
  zmq::context_t ctx_{1};
  zmq::socket_t in_;
  std::vector<zmq::socket_t> out_;
  std::map<int, std::deque<zmq::message_t>> mail_;
};

}  // namespace

result<std::unique_ptr<channel>> make_zmq_channel(int rank, int size, const std::string& bind,
                                                  const std::function<result<std::vector<std::string>>(const std::string&)>& exchange,
                                                  int timeout_ms) {
  if (size < 1 || rank < 0 || rank >= size) return make_error("bad_rank", "rank " + std::to_string(rank) + " of " + std::to_string(size));
  auto c = std::make_unique<zmq_channel>(rank, size, timeout_ms);
  if (auto st = c->start(bind, exchange); !st) return st.err();
  return std::unique_ptr<channel>(std::move(c));
}

}  // namespace dynapar::model
