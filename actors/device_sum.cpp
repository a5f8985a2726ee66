// The holders' sum on a device (docs/DISTRIBUTED.md): a bucket's exact sum among the devices
// holding its layers, or Gloo's all-reduce with exact: false; the sum is held until the
// driver's commit applies it. model::device_sums keeps the state and says what to send and
// answer; this file sends, runs Gloo's lanes and keeps the promises.
#include <algorithm>

#include "actors/device_state.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors::device_detail {
namespace {

model::sum_task task_of(const reduce_task& t) { return {t.tag, t.layer, t.layers, t.holders, t.micro_batches, t.exact, t.norms_divisor}; }

model::device_sums::partials partials_of(device_state& s) {
  return [&s](int layer) { return s.worker->partial_gradients(layer); };
}

// What the sum said: chunks to the bucket's holders, refusals counted and said, the answer.
void carry_out(device_self self, model::sum_out out) {
  auto& s = self->state;
  for (const auto& [device, rank] : out.refused) {
    ++s.data_refused;
    logging::get("device")->warn("device {}: dropped a sum's chunk of layer {} from device {} claiming rank {} ({} refused)", s.cfg.id, out.layer,
                                 device, rank, s.data_refused);
  }
  auto it = s.tickets.find(out.layer);
  if (it == s.tickets.end()) return;
  for (auto& m : out.sends)
    self->send(it->second.peers[static_cast<std::size_t>(m.to)], part_atom::value, reduce_part{out.step, out.layer, std::move(m.msg), s.cfg.id});
  if (!out.answer) return;
  const auto& a = *out.answer;
  if (a.error.empty()) it->second.done.deliver(sum_held{s.cfg.id, a.step, a.layer, a.bytes_in, a.norms});
  else it->second.done.deliver(caf::make_error(caf::sec::runtime_error, a.error));
  s.tickets.erase(it);
}

// exact: false through Gloo: the bucket's gradients, flattened (a copy), all-reduced on the
// communicator's lane; the answer comes back as a gloo_atom message.
void gloo_reduce(device_self self, const reduce_task& t, caf::response_promise done) {
  auto& s = self->state;
  auto flat = s.sum.gloo_start(task_of(t), partials_of(s));
  if (!flat) return done.deliver(caf::make_error(caf::sec::runtime_error, flat.err().message)), void();
  s.tickets[t.layer] = {std::move(done), {}};
  if (!s.gloo) s.gloo = std::make_unique<gloo_lanes>(s.cfg.gloo_host, s.cfg.gloo_timeout_s);
  const int rank = static_cast<int>(std::find(t.holders.begin(), t.holders.end(), s.cfg.id) - t.holders.begin());
  auto me = caf::actor_cast<device_impl>(self);
  s.gloo->start(t.store, t.generation, t.holders, rank, std::move(*flat), [me, tag = t.tag, layer = t.layer](result<std::vector<model::tensor>> r) {
    if (r) caf::anon_send(me, gloo_atom::value, tag, layer, std::move(*r), std::string{});
    else caf::anon_send(me, gloo_atom::value, tag, layer, std::vector<model::tensor>{}, r.err().message);
  });
}

}  // namespace

caf::result<applied> apply_sum(device_state& s, std::int64_t tag, int layer, const std::vector<model::tensor>& sum, double divisor,
                               double scale) {
  // The learning rate follows the training step of the attempt's
  // task, which every holder ran (it holds the layer because its stage has it).
  if (s.task.tag != tag)
    return caf::make_error(caf::sec::runtime_error, "device " + std::to_string(s.cfg.id) + ", layer " + std::to_string(layer) +
                                                        ": a sum of attempt " + std::to_string(tag) + ", but its task is of attempt " +
                                                        std::to_string(s.task.tag));
  const device_clock::work_start w;
  auto st = s.worker->apply(layer, sum, divisor, s.task.train_step, scale);
  s.speed.finish(w, s.speed.update_s(layer));
  if (!st) return caf::make_error(caf::sec::runtime_error, st.err().message);
  s.updated_at = std::chrono::steady_clock::now();
  s.updated_step = s.task.train_step;
  return applied{s.cfg.id, tag, layer};
}

caf::result<applied> commit_sum(device_state& s, std::int64_t tag, int layer, double divisor, double scale) {
  auto per_layer = s.sum.commit(tag, layer);
  if (!per_layer) return caf::make_error(caf::sec::runtime_error, per_layer.err().message);
  for (const auto& [l, summed] : *per_layer) {
    auto r = apply_sum(s, tag, l, summed, divisor, scale);
    if (r.flag == caf::rt_error) return r;
  }
  return applied{s.cfg.id, tag, layer};
}

void sum_take(device_self self, reduce_part p) {
  auto& s = self->state;
  carry_out(self, s.sum.take(p.tag, p.layer, p.device, std::move(p.msg)));
}

void gloo_done(device_self self, std::int64_t tag, int layer, const std::vector<model::tensor>& sum, const std::string& error) {
  if (auto a = self->state.sum.gloo_done(tag, layer, sum, error)) carry_out(self, {tag, layer, {}, std::move(a), {}});  // else an abandoned attempt's
}

void start_reduce(device_self self, reduce_task t, caf::response_promise done) {
  auto& s = self->state;
  // A task replaces an abandoned attempt's sum of the bucket, dropped unanswered (nobody
  // waits for it any more; an answer would only reach the next attempt's wait).
  s.tickets.erase(t.layer);
  if (!t.store.empty()) return gloo_reduce(self, t, std::move(done));
  if (t.peers.size() != t.holders.size())
    return done.deliver(caf::make_error(caf::sec::runtime_error, "device " + std::to_string(s.cfg.id) + " was given " +
                                                                      std::to_string(t.peers.size()) + " handles for " +
                                                                      std::to_string(t.holders.size()) + " holders")),
           void();
  s.tickets[t.layer] = {std::move(done), t.peers};
  carry_out(self, s.sum.start(task_of(t), partials_of(s)));
}

void start_deferred(device_self self) {
  auto& s = self->state;
  auto waiting = std::move(s.deferred);
  s.deferred.clear();
  for (auto& [t, done] : waiting) {
    if (t.tag <= s.task.tag) start_reduce(self, std::move(t), std::move(done));
    else s.deferred.emplace_back(std::move(t), std::move(done));
  }
}

}  // namespace dynapar::actors::device_detail
