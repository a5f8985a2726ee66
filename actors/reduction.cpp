#include "actors/reduction.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

namespace dynapar::actors {
namespace {

// Calls send(device, layer) for every holder of every layer; returns how many.
template <class Send>
int each_holder(const std::map<int, std::vector<int>>& holders, Send send) {
  int n = 0;
  for (const auto& [l, ids] : holders)
    for (int id : ids) {
      send(id, l);
      ++n;
    }
  return n;
}

// The driver adds: one request per device for all the layers it holds, sent when the device is
// ready; the sums go back to every holder.
class central_work : public reduction_work {
 public:
  central_work(caf::scoped_actor& self, const std::map<int, device_handle>& devices, bool exact, const reduction_step& s)
      : self_(self), devices_(devices), exact_(exact), s_(s) {
    for (const auto& [l, ids] : *s.holders)
      for (int id : ids) held_[id].push_back(l);
    waiting_ = held_.size();
  }
  void ready(int device) override {
    const auto it = held_.find(device);
    if (it == held_.end()) return;
    self_->send(devices_.at(device), grads_atom::value, s_.tag, it->second);
    held_.erase(it);  // asked once
  }
  void on(device_gradients& g) override {
    if (g.tag != s_.tag) return;
    --waiting_;
    for (auto& [l, micro] : g.layers) got_[{g.device, l}] = std::move(micro);
  }
  void on(const sum_held&) override {}
  bool done() const override { return waiting_ == 0; }
  status finish() override {
    for (const auto& [l, ids] : *s_.holders) {
      std::vector<model::grad_part> parts;
      for (int id : ids)
        for (auto& part : got_[{id, l}]) parts.push_back(std::move(part));
      auto sum = exact_ ? model::tree_sum(std::move(parts), s_.micro_batches) : model::holders_sum(std::move(parts));
      if (!sum) return make_error(sum.err().code, "layer " + std::to_string(l) + ": " + sum.err().message);
      summed_[l] = std::move(*sum);
    }
    return ok_status();
  }
  std::map<int, std::vector<float>> norms() const override {
    std::map<int, std::vector<float>> out;
    for (const auto& [l, sum] : summed_) out[l] = model::grad_norms(sum, s_.norms_divisor);
    return out;
  }
  int apply(double batch, double scale) override {
    return each_holder(*s_.holders, [&](int id, int l) { self_->send(devices_.at(id), apply_atom::value, s_.tag, l, summed_[l], batch, scale); });
  }

 private:
  caf::scoped_actor& self_;
  const std::map<int, device_handle>& devices_;
  const bool exact_;
  const reduction_step s_;
  std::map<int, std::vector<int>> held_;  // device -> layers, until it is asked
  std::size_t waiting_ = 0;
  std::map<std::pair<int, int>, std::vector<model::grad_part>> got_;  // (device, layer) -> partial sums
  std::map<int, std::vector<model::tensor>> summed_;                  // layer -> its sum
};

// The holders add: once every holder of a bucket is ready, each gets the bucket's task and
// answers when it holds the sum; the commit has each apply it. A bucket (bucket_layers) is one
// exchange and one commit for all its layers, where one per layer cost a round of messages
// each (docs/RUNTIME.md).
class peer_work : public reduction_work {
 public:
  peer_work(caf::scoped_actor& self, const std::map<int, device_handle>& devices, bool exact, const peer_options& o,
            const reduction_step& s)
      : self_(self), devices_(devices), exact_(exact), store_(exact ? "" : o.gloo_store), at_start_(o.at_start), s_(s) {
    for (const auto& span : bucket_layers(*s.holders, o)) {
      const auto& ids = s.holders->at(span.lo);
      for (int l = span.lo; l < span.hi; ++l) buckets_[span.lo].push_back(l);
      unready_[span.lo] = static_cast<int>(ids.size());
      waiting_ += ids.size();
      for (int id : ids) buckets_of_[id].push_back(span.lo);
    }
    if (at_start_)
      for (const auto& [l, layers] : buckets_) send_task(l);
  }
  void ready(int device) override {
    const auto it = buckets_of_.find(device);
    if (at_start_ || it == buckets_of_.end()) return;  // at the start: every task went out already
    for (int l : it->second)
      if (--unready_[l] == 0) send_task(l);
    buckets_of_.erase(it);  // ready once
  }
  void on(device_gradients&) override {}
  void on(const sum_held& h) override {
    if (h.tag != s_.tag) return;
    --waiting_;
    // Every holder's norms of a layer are the same bits (the same sum): the first one kept.
    const auto it = buckets_.find(h.layer);
    if (it != buckets_.end())
      for (std::size_t i = 0; i < h.norms.size() && i < it->second.size(); ++i) norms_.emplace(it->second[i], h.norms[i]);
  }
  std::map<int, std::vector<float>> norms() const override { return norms_; }
  bool done() const override { return waiting_ == 0; }
  status finish() override { return ok_status(); }
  int apply(double batch, double scale) override {
    int n = 0;
    for (const auto& [l, layers] : buckets_)
      for (int id : s_.holders->at(l)) {
        self_->send(devices_.at(id), commit_atom::value, s_.tag, l, batch, scale);
        ++n;
      }
    return n;
  }
  std::map<int, std::vector<int>> buckets() const override { return buckets_; }

 private:
  void send_task(int l) {
    const auto& ids = s_.holders->at(l);
    reduce_task task{s_.tag, l, s_.micro_batches, exact_, {ids.begin(), ids.end()}, {}, store_, s_.generation, buckets_.at(l), s_.norms_divisor};
    for (int id : ids) task.peers.push_back(devices_.at(id));
    for (int id : ids) self_->send(devices_.at(id), reduce_atom::value, task);
  }
  caf::scoped_actor& self_;
  const std::map<int, device_handle>& devices_;
  const bool exact_;
  const std::string store_;
  const bool at_start_;
  const reduction_step s_;
  std::map<int, std::vector<int>> buckets_;     // first layer -> the bucket's layers, ascending
  std::map<int, std::vector<int>> buckets_of_;  // device -> buckets it holds, until it is ready
  std::map<int, int> unready_;                  // bucket -> holders not yet ready
  int waiting_ = 0;
  std::map<int, std::vector<float>> norms_;     // layer -> its gradient norms (clipping)
};

// Each step's work, made by `make`.
class reduction_of : public gradient_reduction {
 public:
  explicit reduction_of(std::function<std::unique_ptr<reduction_work>(const reduction_step&)> make) : make_(std::move(make)) {}
  std::unique_ptr<reduction_work> start(const reduction_step& s) override { return make_(s); }

 private:
  std::function<std::unique_ptr<reduction_work>(const reduction_step&)> make_;
};

}  // namespace

std::vector<planner::layer_span> bucket_layers(const std::map<int, std::vector<int>>& holders, const peer_options& o) {
  std::vector<std::size_t> below{0};  // parameter bytes of the layers below each, by layer
  for (std::size_t l = 0; l < o.layer_bytes.size(); ++l) below.push_back(below.back() + o.layer_bytes[l]);
  const auto bytes = [&](int a, int b) {
    auto at = [&](int l) { return below[std::min(static_cast<std::size_t>(l), below.size() - 1)]; };
    return static_cast<double>(at(b) - at(a));
  };
  const double least = o.bucket_bytes == 0 ? std::numeric_limits<double>::infinity() : static_cast<double>(o.bucket_bytes);
  std::vector<planner::layer_span> out;
  for (auto it = holders.begin(); it != holders.end();) {
    auto end = std::next(it);  // the run: the next layers, as long as they have the same holders
    while (end != holders.end() && end->first == std::prev(end)->first + 1 && end->second == it->second) ++end;
    const int lo = it->first, hi = std::prev(end)->first + 1;
    auto spans = planner::bucket_spans(lo, hi, least, bytes);
    out.insert(out.end(), spans.rbegin(), spans.rend());
    it = end;
  }
  return out;
}

std::unique_ptr<gradient_reduction> central_reduction(caf::scoped_actor& self, const std::map<int, device_handle>& devices, bool exact) {
  return std::make_unique<reduction_of>([&self, &devices, exact](const reduction_step& s) {
    return std::make_unique<central_work>(self, devices, exact, s);
  });
}

std::unique_ptr<gradient_reduction> peer_reduction(caf::scoped_actor& self, const std::map<int, device_handle>& devices, bool exact,
                                                   const peer_options& o) {
  return std::make_unique<reduction_of>([&self, &devices, exact, o](const reduction_step& s) {
    return std::make_unique<peer_work>(self, devices, exact, o, s);
  });
}

}  // namespace dynapar::actors
