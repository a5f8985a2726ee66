#include "training/shard_names.hpp"
#include "actors/remote/proxy.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "actors/remote/hub_state.hpp"

namespace dynapar::actors::remote {

namespace {

// A device on a node, as the driver and the group supervisors see it.
struct proxy_state {
  int id = 0;
  std::string route;
  std::shared_ptr<remote_devices::impl> hub;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, std::function<void(const wire::device_call*, std::vector<model::tensor>&, const std::string&)>> pending;
  stage_sink report_to;
  migration_sink moves_to;  // who started the last move (its arrival goes there)
  std::int64_t step = 0;  // the tag of the last step task: a loss report must carry it
  std::string lost;  // why the device is gone (its node went silent); empty while it is there
  static inline const char* name = "remote_device";
};
using proxy = remote_device_handle::stateful_base<proxy_state>;

void tell(proxy* self, wire::device_call c, const std::vector<model::tensor>& ts = {}, std::atomic<std::uint64_t>* counted = nullptr) {
  if (!self->state.lost.empty()) return;
  c.device = self->state.id;
  self->state.hub->post(self->state.route, c, ts, counted);
}

// Sends a call and keeps `done` for its answer (or for the node's loss: a null answer).
template <class Done>
void expect(proxy* self, wire::device_call c, const std::vector<model::tensor>& ts, Done done) {
  auto& s = self->state;
  c.id = s.next_id++;
  s.pending[c.id] = std::move(done);
  tell(self, std::move(c), ts);
}

// A call with an answer: the promise is kept until the node replies (or the proxy stops,
// which breaks it: the requester's timeout or error handler sees that).
template <class T, class Decode>
caf::result<T> ask(proxy* self, wire::device_call c, const std::vector<model::tensor>& ts, Decode decode) {
  if (!self->state.lost.empty()) return caf::make_error(caf::sec::runtime_error, self->state.lost);
  auto rp = self->make_response_promise<T>();
  expect(self, std::move(c), ts, [rp, decode](const wire::device_call* r, std::vector<model::tensor>& got, const std::string& error) mutable {
    if (!r) return rp.deliver(caf::make_error(caf::sec::runtime_error, error)), void();
    result<T> v = decode(*r, got);
    if (!v) return rp.deliver(caf::make_error(caf::sec::runtime_error, v.err().message)), void();
    rp.deliver(std::move(*v));
  });
  return rp;
}

// Decodes the answer a call expects (of type Answer) with f(answer, tensors); an answer of
// another type is an error naming `what`.
template <class T, class Answer, class F>
auto answer(const char* what, F f) {
  return [=](const wire::device_call& r, std::vector<model::tensor>& ts) -> result<T> {
    const auto* a = std::get_if<Answer>(&r.op);
    if (!a) return make_error("bad_call", std::string("the answer to ") + what + " is of another kind");
    return f(*a, ts);
  };
}

const auto acknowledged = answer<bool, wire::ops::ack>("a call", [](const auto&, auto&) { return true; });

// The node's ack of an apply or a commit: the device applied that step's sum to the layer.
auto confirmed(int device, std::int64_t step, int layer) {
  return answer<applied, wire::ops::ack>("an apply or a commit", [=](const auto&, auto&) { return applied{device, step, layer}; });
}

// A copy of a layer the device holds. Whole: its parameters and up to three optimizer
// tensors each (Adam's moments, amsgrad's maximum). `lean`: parameters and buffers, with the
// whole state's hash its node took (model::drop_optimizer_state).
caf::result<model::layer_copy> ask_copy(proxy* self, int layer, bool lean) {
  auto shared = self->state.hub;
  shared->expect_large(self->state.route, (lean ? 2.0 : 4.0) * static_cast<double>(model::param_bytes(*shared->model, layer)));
  auto decode = [shared, lean](const wire::ops::hold& h, auto& ts) -> result<model::layer_copy> {
    auto l = remote::layer_from(shared->layers, h, ts);
    if (!l) return l.err();
    if (lean && h.state_hash == 0) return make_error("bad_call", "a layer copy without its optimizer state came without its hash");
    if (lean) model::drop_optimizer_state(l->replica, h.state_hash);
    return l->replica;
  };
  auto op = lean ? wire::device_op{wire::ops::copy_lean{layer}} : wire::device_op{wire::ops::copy{layer}};
  return ask<model::layer_copy>(self, remote::call_to(0, std::move(op)), {}, answer<model::layer_copy, wire::ops::hold>("a copy", decode));
}

remote_device_handle::behavior_type remote_device(proxy* self, int id, std::string route, std::uint64_t gen, std::shared_ptr<remote_devices::impl> hub) {
  self->state.id = id;
  self->state.route = std::move(route);
  self->state.hub = hub;
  self->attach_functor([hub, id, gen] { hub->retired(id, gen); });
  namespace ops = wire::ops;
  auto call = [](wire::device_op op) { return remote::call_to(0, std::move(op)); };
  return {
      [=](hold_atom, int layer, const model::layer_copy& replica) -> caf::result<bool> {
        if (!replica && (layer < 0 || static_cast<std::size_t>(layer) >= hub->fresh.size()))
          return caf::make_error(caf::sec::runtime_error, "layer " + std::to_string(layer) + " to build on its node: no such layer");
        std::vector<model::tensor> ts;
        auto op = remote::placed_layer(layer, id, replica, hub->fresh, ts);
        return ask<bool>(self, call(std::move(op)), ts, acknowledged);
      },
      // The node reads the shard itself: nothing of the layer passes through here.
      [=](hold_atom, int layer, const training::shard_file& f) -> caf::result<bool> {
        ops::hold h{layer, -1, id, 0, {}};
        h.shard = training::shard_name(f.path);  // the node finds it in its own --shard-dir
        h.shard_sha256 = f.sha256;
        return ask<bool>(self, call(std::move(h)), {}, acknowledged);
      },
      [=](migrate_atom, int layer, int to, const device_peer&, const comm::link_spec& link,
          const migration_sink& report_to) -> caf::result<bool> {
        self->state.moves_to = report_to;
        return ask<bool>(self, call(ops::migrate{layer, to, remote::link_of(link)}), {}, acknowledged);
      },
      [=](expect_atom, int layer, int from) -> caf::result<bool> { return ask<bool>(self, call(ops::expect{layer, from}), {}, acknowledged); },
      [=](drop_atom, int layer) -> caf::result<bool> { return ask<bool>(self, call(ops::drop{layer}), {}, acknowledged); },
      [=](speed_atom, double speed) { tell(self, call(ops::speed{speed})); },
      [=](memory_atom, double bytes) { tell(self, call(ops::memory{bytes})); },
      [=](timing_atom, const std::vector<double>& per_layer) {
        ops::timing t;
        for (std::size_t i = 0; i + 3 < per_layer.size(); i += 4)
          t.layers.push_back({per_layer[i], per_layer[i + 1], per_layer[i + 2], per_layer[i + 3]});
        tell(self, call(std::move(t)));
      },
      [=](probe_atom) -> caf::result<double> {
        return ask<double>(self, call(ops::probe{}), {},
                           answer<double, ops::probed>("a probe", [](const ops::probed& p, auto&) { return p.seconds; }));
      },
      [=](step_atom, stage_task& task) {
        self->state.report_to = task.report_to;
        self->state.step = task.tag;
        if (!self->state.lost.empty()) {
          stage_report r;
          r.device = id;
          r.tag = task.tag;
          r.error = self->state.lost;
          self->send(task.report_to, std::move(r));
          return;
        }
        std::vector<model::tensor> ts;
        auto& h = *self->state.hub;
        const bool by_ids = h.holds_data(self->state.route);
        const auto unbuilt = [](const std::vector<model::tensor>& v) { return std::any_of(v.begin(), v.end(), [](const auto& x) { return !x; }); };
        if (!by_ids && (unbuilt(task.inputs) || unbuilt(task.targets))) {  // the driver saw the node's proof, which is gone
          stage_report r;
          r.device = id;
          r.tag = task.tag;
          r.error = "device " + std::to_string(id) + ": its node no longer proves the job's data set, and the step's inputs were left to it";
          self->send(task.report_to, std::move(r));
          return;
        }
        auto op = remote::step_of(task, ts, by_ids);
        tell(self, call(std::move(op)), ts, &h.inputs);
      },
      [=](grads_atom, std::int64_t step, const std::vector<int>& layers) -> caf::result<device_gradients> {
        return ask<device_gradients>(self, call(ops::gradients{step, layers}), {},
                                     answer<device_gradients, ops::gradient_set>("gradients", remote::gradients_from));
      },
      [=](apply_atom, std::int64_t step, int layer, const std::vector<model::tensor>& summed, double divisor, double scale) -> caf::result<applied> {
        return ask<applied>(self, call(ops::apply{step, layer, divisor, scale}), summed, confirmed(id, step, layer));
      },
      // The holders add among themselves, node to node; the node answers once the sum is held.
      [=](reduce_atom, const reduce_task& t) -> caf::result<sum_held> {
        return ask<sum_held>(self, call(remote::reduce_of(t)), {}, answer<sum_held, ops::sum_held>("a sum", [id](const ops::sum_held& h, auto&) {
                               return sum_held{id, h.tag, h.layer, h.bytes_in, h.norms};
                             }));
      },
      [=](commit_atom, std::int64_t step, int layer, double divisor, double scale) -> caf::result<applied> {
        return ask<applied>(self, call(ops::commit{step, layer, divisor, scale}), {}, confirmed(id, step, layer));
      },
      [=](hash_atom, int layer) -> caf::result<std::uint64_t> {
        return ask<std::uint64_t>(self, call(ops::hash{layer}), {},
                                  answer<std::uint64_t, ops::hashed>("a hash", [](const ops::hashed& h, auto&) { return h.value; }));
      },
      [=](copy_atom, int layer) { return ask_copy(self, layer, false); },
      [=](copy_lean_atom, int layer) { return ask_copy(self, layer, true); },
      [=](save_atom, int layer, const std::string& path) -> caf::result<ops::shard_saved> {
        return ask<ops::shard_saved>(self, call(ops::save_shard{layer, training::shard_name(path)}), {},
                                     answer<ops::shard_saved, ops::shard_saved>("a shard", [](const ops::shard_saved& x, auto&) { return x; }));
      },
      [=](perturb_atom, int layer) { tell(self, call(ops::perturb{layer})); },
      // What a device of this process would send its neighbour on a node: sent on as data.
      [=](act_atom, std::int64_t step, int micro, int from, const model::tensor& t) { tell(self, call(ops::activation{step, micro, from}), {t}); },
      [=](grad_atom, std::int64_t step, int micro, int from, const model::tensor& t) { tell(self, call(ops::gradient{step, micro, from}), {t}); },
      [=](part_atom, const reduce_part& p) {
        std::vector<model::tensor> ts;
        auto op = remote::part_of(p, ts);
        tell(self, call(std::move(op)), ts);
      },
      // A layer migrating here from a device of this process: placed by a call, whose answer
      // (or the node's loss) is the arrival or the refusal the mover waits for.
      [=](hold_atom, const layer_transfer& x) {
        if (!self->state.lost.empty()) return self->send(x.report_to, moved_atom::value, x.layer, x.from, x.to, self->state.lost);
        std::vector<model::tensor> ts;
        auto op = remote::layer_of(x.layer, -1, id, 0, x.replica, ts);
        expect(self, call(std::move(op)), ts, [self, x](const wire::device_call* r, auto&, const std::string& error) {
          if (r) self->send(x.report_to, moved_atom::value, x.layer, x.from, x.to, x.bytes);
          else self->send(x.report_to, moved_atom::value, x.layer, x.from, x.to, error);
        });
      },
      // Fault injection on a node: the whole process dies, as a machine would.
      [=](fail_atom, int after_us) { tell(self, call(ops::fail{static_cast<std::uint64_t>(std::max(0, after_us))})); },
      // The node goes silent: hung, or cut off (its traffic dropped).
      [=](pause_atom, int after_us, double seconds, bool cut_off) {
        tell(self, call(ops::pause{static_cast<std::uint64_t>(std::max(0, after_us)), cut_off, seconds}));
      },
      // From the node: answers, stage reports, arrivals of migrated layers.
      [=](remote_atom, const wire::device_call& c, std::vector<model::tensor>& ts) {
        auto& s = self->state;
        if (const auto* e = std::get_if<ops::error>(&c.op); e && c.id == 0) {
          // From the hub: the node is lost. Nothing waits in vain.
          s.lost = "device " + std::to_string(id) + ": " + e->why;
          auto pending = std::move(s.pending);
          s.pending.clear();
          std::vector<model::tensor> none;
          for (auto& [k, done] : pending) done(nullptr, none, s.lost);
          if (s.report_to) {
            stage_report r;
            r.device = id;
            r.tag = s.step;
            r.error = s.lost;
            self->send(s.report_to, std::move(r));
          }
          return;
        }
        if (const auto* r = std::get_if<ops::stage_report>(&c.op)) {
          if (s.report_to) self->send(s.report_to, *r);
          return;
        }
        if (const auto* m = std::get_if<ops::moved>(&c.op)) {
          if (!s.moves_to) return;
          if (!m->refused.empty()) self->send(s.moves_to, moved_atom::value, m->layer, m->from, m->to, m->refused);
          else self->send(s.moves_to, moved_atom::value, m->layer, m->from, m->to, static_cast<std::size_t>(m->bytes));
          return;
        }
        if (c.id == 0) return;  // nothing else comes unasked
        auto it = s.pending.find(c.id);
        if (it == s.pending.end()) return;  // the answer to a call nobody waits for any more
        auto done = std::move(it->second);
        s.pending.erase(it);
        const auto* e = std::get_if<ops::error>(&c.op);
        done(e ? nullptr : &c, ts, "device " + std::to_string(id) + ": " + (e ? e->why : std::string()));
      },
  };
}

}  // namespace

remote_device_handle spawn_remote_device(caf::actor_system& sys, int id, const std::string& route, std::uint64_t gen,
                               std::shared_ptr<remote_devices::impl> hub) {
  return sys.spawn(remote_device, id, route, gen, std::move(hub));
}

}  // namespace dynapar::actors::remote
