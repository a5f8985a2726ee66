// The holders' sum on a device (docs/DISTRIBUTED.md): a bucket's exact sum among the
// devices holding its layers (model::peer_sum), or Gloo's all-reduce with exact: false; the
// sum is held until the driver's commit applies it.
#include <algorithm>

#include "actors/device_state.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors::device_detail {
namespace {

// A reduce_task's bucket: its layers' partial sums joined into one list.
result<std::vector<model::grad_part>> bucket_parts(device_state& s, const reduce_task& t, device_state::bucket& b) {
  b.layers = t.layers.empty() ? std::vector<int>{t.layer} : t.layers;
  std::vector<std::vector<model::grad_part>> per_layer;
  for (int l : b.layers) {
    per_layer.push_back(s.worker->partial_gradients(l));
    b.counts.push_back(per_layer.back().empty() ? 0 : per_layer.back().front().grads.size());
  }
  return model::join_layers(std::move(per_layer));
}

// The decentralised sum of a layer: sends what peer_sum says, and once it is complete holds
// the sum for the commit and answers the driver; an error answers at once.
void sum_progress(device_self self, int layer, result<std::vector<model::chunk_send>> out) {
  auto& s = self->state;
  auto it = s.sums.find(layer);
  if (it == s.sums.end()) return;
  auto& e = it->second;
  auto fail = [&](const std::string& why) {
    e.done.deliver(caf::make_error(caf::sec::runtime_error, "device " + std::to_string(s.cfg.id) + ", layer " + std::to_string(layer) + ": " + why));
    s.sums.erase(it);
  };
  if (!out) return fail(out.err().message);
  for (auto& m : *out)
    self->send(e.task.peers[static_cast<std::size_t>(m.to)], part_atom::value, reduce_part{e.task.step, layer, std::move(m.msg), s.cfg.id});
  if (!e.sum->done()) return;
  auto total = e.sum->sum();
  if (!total) return fail(total.err().message);
  e.done.deliver(held_answer(s, e.task.step, layer, e.b, *total, e.bytes_in, e.task.norms_divisor));
  s.summed[layer] = {e.task.step, std::move(e.b), std::move(*total)};
  s.sums.erase(it);
}

// exact: false through Gloo: the holder's gradients of the layer, flattened (a copy), all-reduced
// on the communicator's lane; the answer comes back as a gloo_atom message.
void gloo_reduce(device_self self, const reduce_task& t, int rank, caf::response_promise done) {
  auto& s = self->state;
  auto fail = [&](const std::string& why) {
    done.deliver(caf::make_error(caf::sec::runtime_error, "device " + std::to_string(s.cfg.id) + ", layer " + std::to_string(t.layer) + ": " + why));
  };
  device_state::bucket b;
  auto parts = bucket_parts(s, t, b);
  if (!parts) return fail(parts.err().message);
  auto flat = model::flatten(*parts);
  if (!flat) return fail(flat.err().message);
  if (!s.gloo) s.gloo = std::make_unique<gloo_lanes>(s.cfg.gloo_host, s.cfg.gloo_timeout_s);
  const auto p = static_cast<double>(t.holders.size());
  auto& w = s.gloo_waiting[t.layer];
  w = {t.step, std::move(b), std::move(done), static_cast<std::int64_t>(2 * (p - 1) / p * static_cast<double>(model::bytes(flat->flat))),
       t.norms_divisor};
  auto me = caf::actor_cast<device_impl>(self);
  s.gloo->start(t.store, t.generation, t.holders, rank, std::move(*flat), [me, step = t.step, layer = t.layer](result<std::vector<model::tensor>> r) {
    if (r) caf::anon_send(me, gloo_atom::value, step, layer, std::move(*r), std::string{});
    else caf::anon_send(me, gloo_atom::value, step, layer, std::vector<model::tensor>{}, r.err().message);
  });
}

}  // namespace

caf::result<applied> apply_sum(device_state& s, std::int64_t step, int layer, const std::vector<model::tensor>& sum, double divisor,
                               double scale) {
  // `step` is the attempt's tag; the learning rate follows the training step of the attempt's
  // task, which every holder ran (it holds the layer because its stage has it).
  if (s.task.step != step)
    return caf::make_error(caf::sec::runtime_error, "device " + std::to_string(s.cfg.id) + ", layer " + std::to_string(layer) +
                                                        ": a sum of attempt " + std::to_string(step) + ", but its task is of attempt " +
                                                        std::to_string(s.task.step));
  const device_clock::work_start w;
  auto st = s.worker->apply(layer, sum, divisor, s.task.train_step, scale);
  s.speed.finish(w, s.speed.update_s(layer));
  if (!st) return caf::make_error(caf::sec::runtime_error, st.err().message);
  s.updated_at = std::chrono::steady_clock::now();
  s.updated_step = s.task.train_step;
  return applied{s.cfg.id, step, layer};
}

void sum_take(device_self self, reduce_part p) {
  auto& s = self->state;
  auto& e = s.sums.at(p.layer);
  const auto& holders = e.task.holders;
  if (p.msg.from < 0 || static_cast<std::size_t>(p.msg.from) >= holders.size() || holders[static_cast<std::size_t>(p.msg.from)] != p.device) {
    ++s.data_refused;
    logging::get("device")->warn("device {}: dropped a sum's chunk of layer {} from device {} claiming rank {} ({} refused)", s.cfg.id, p.layer,
                                 p.device, p.msg.from, s.data_refused);
    return;
  }
  for (const auto& part : p.msg.parts) e.bytes_in += static_cast<std::int64_t>(model::bytes(part.grads));
  sum_progress(self, p.layer, e.sum->take(std::move(p.msg)));
}

void start_reduce(device_self self, reduce_task t, caf::response_promise done) {
  auto& s = self->state;
  // An abandoned attempt's sum: dropped unanswered (nobody waits for it any more; an
  // answer would only reach the next attempt's wait).
  s.sums.erase(t.layer);
  for (auto it = s.early.begin(); it != s.early.end();) it = it->first.first < t.step ? s.early.erase(it) : std::next(it);
  s.summed.erase(t.layer);
  s.gloo_waiting.erase(t.layer);
  const auto me = std::find(t.holders.begin(), t.holders.end(), s.cfg.id);
  if (me == t.holders.end() || t.peers.size() != t.holders.size())
    return done.deliver(caf::make_error(caf::sec::runtime_error, "device " + std::to_string(s.cfg.id) + " is not among the holders it was given")), void();
  if (!t.store.empty()) return gloo_reduce(self, t, static_cast<int>(me - t.holders.begin()), std::move(done));
  const int layer = t.layer;
  auto& e = s.sums[layer];
  e.sum = std::make_unique<model::peer_sum>(static_cast<int>(me - t.holders.begin()), static_cast<int>(t.holders.size()), t.micro_batches, t.exact);
  e.done = std::move(done);
  auto parts = bucket_parts(s, t, e.b);
  e.task = std::move(t);
  const auto key = std::make_pair(e.task.step, layer);
  sum_progress(self, layer, parts ? e.sum->start(*parts) : result<std::vector<model::chunk_send>>(parts.err()));
  if (auto it = s.early.find(key); it != s.early.end()) {
    auto msgs = std::move(it->second);
    s.early.erase(it);
    for (auto& m : msgs) {
      if (!s.sums.count(layer)) break;
      sum_take(self, std::move(m));
    }
  }
}

void start_deferred(device_self self) {
  auto& s = self->state;
  auto waiting = std::move(s.deferred);
  s.deferred.clear();
  for (auto& [t, done] : waiting) {
    if (t.step <= s.task.step) start_reduce(self, std::move(t), std::move(done));
    else s.deferred.emplace_back(std::move(t), std::move(done));
  }
}

sum_held held_answer(const device_state& s, std::int64_t step, int layer, const device_state::bucket& b,
                     const std::vector<model::tensor>& sum, std::int64_t bytes_in, double norms_divisor) {
  sum_held h{s.cfg.id, step, layer, bytes_in, {}};
  if (!(norms_divisor > 0)) return h;
  const auto all = model::grad_norms(sum, norms_divisor);  // the bucket's layers one after another
  std::size_t at = 0;
  for (const std::size_t n : b.counts) {
    const std::size_t lo = std::min(at, all.size()), hi = std::min(at + n, all.size());
    h.norms.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(lo), all.begin() + static_cast<std::ptrdiff_t>(hi));
    at += n;
  }
  return h;
}

}  // namespace dynapar::actors::device_detail
