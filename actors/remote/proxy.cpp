#include "actors/remote/proxy.hpp"

#include <functional>
#include <limits>
#include <map>
#include <utility>

#include "actors/remote/hub_state.hpp"

namespace dynapar::actors {

namespace {

// A device on a node, as the driver and the group supervisors see it.
struct proxy_state {
  int id = 0;
  std::string route;
  std::shared_ptr<remote_devices::impl> hub;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, std::function<void(const wire::device_call*, std::vector<model::tensor>&, const std::string&)>> pending;
  caf::actor report_to, migration_sink;
  std::int64_t step = 0;  // the tag of the last step task: a loss report must carry it
  std::string lost;  // why the device is gone (its node went silent); empty while it is there
  static inline const char* name = "remote_device";
};
using proxy = caf::stateful_actor<proxy_state>;

void tell(proxy* self, wire::device_call c, const std::vector<model::tensor>& ts = {}) {
  if (!self->state.lost.empty()) return;
  c.device = self->state.id;
  self->state.hub->post(self->state.route, c, ts);
}

// A call with an answer: the promise is kept until the node replies (or the proxy stops,
// which breaks it: the requester's timeout or error handler sees that).
template <class T, class Decode>
caf::result<T> ask(proxy* self, wire::device_call c, const std::vector<model::tensor>& ts, Decode decode) {
  auto& s = self->state;
  if (!s.lost.empty()) return caf::make_error(caf::sec::runtime_error, s.lost);
  auto rp = self->make_response_promise<T>();
  c.id = s.next_id++;
  s.pending[c.id] = [rp, decode](const wire::device_call* r, std::vector<model::tensor>& got, const std::string& error) mutable {
    if (!r) return rp.deliver(caf::make_error(caf::sec::runtime_error, error)), void();
    result<T> v = decode(*r, got);
    if (!v) return rp.deliver(caf::make_error(caf::sec::runtime_error, v.err().message)), void();
    rp.deliver(std::move(*v));
  };
  tell(self, std::move(c), ts);
  return rp;
}

wire::device_call call(wire::device_op op, std::vector<std::int64_t> ints = {}, std::vector<double> reals = {}) {
  wire::device_call c;
  c.op = op;
  c.ints = std::move(ints);
  c.reals = std::move(reals);
  return c;
}

result<bool> acknowledged(const wire::device_call&, std::vector<model::tensor>&) { return true; }

caf::behavior remote_device(proxy* self, int id, std::string route, std::uint64_t gen, std::shared_ptr<remote_devices::impl> hub) {
  self->state.id = id;
  self->state.route = std::move(route);
  self->state.hub = hub;
  self->attach_functor([hub, id, gen] { hub->retired(id, gen); });
  using op = wire::device_op;
  return {
      [=](hold_atom, int layer, const model::layer_copy& replica) -> caf::result<bool> {
        std::vector<model::tensor> ts;
        auto c = remote::layer_call(id, layer, -1, id, 0, replica, ts);
        return ask<bool>(self, std::move(c), ts, acknowledged);
      },
      [=](migrate_atom, int layer, int to, const caf::actor&, const comm::link_spec& link,
          const caf::actor& report_to) -> caf::result<bool> {
        self->state.migration_sink = report_to;
        return ask<bool>(self, call(op::migrate, {layer, to}, remote::link_reals(link, {})), {}, acknowledged);
      },
      [=](drop_atom, int layer) { tell(self, call(op::drop, {layer})); },
      [=](speed_atom, double speed) { tell(self, call(op::speed, {}, {speed})); },
      [=](memory_atom, double bytes) { tell(self, call(op::memory, {}, {bytes})); },
      [=](timing_atom, const std::vector<double>& per_layer) { tell(self, call(op::timing, {}, per_layer)); },
      [=](probe_atom) -> caf::result<double> {
        return ask<double>(self, call(op::probe), {}, [](const wire::device_call& r, std::vector<model::tensor>&) -> result<double> {
          if (r.reals.size() != 1) return make_error("bad_call", "a probe reply needs one real");
          return r.reals[0];
        });
      },
      [=](step_atom, stage_task& task) {
        self->state.report_to = task.report_to;
        self->state.step = task.step;
        if (!self->state.lost.empty()) {
          stage_report r;
          r.device = id;
          r.step = task.step;
          r.error = self->state.lost;
          self->send(task.report_to, std::move(r));
          return;
        }
        std::vector<model::tensor> ts;
        auto c = remote::step_call(task, ts);
        tell(self, std::move(c), ts);
      },
      [=](grads_atom, std::int64_t step, const std::vector<int>& layers) -> caf::result<device_gradients> {
        std::vector<std::int64_t> ints{step};
        ints.insert(ints.end(), layers.begin(), layers.end());
        return ask<device_gradients>(self, call(op::gradients, std::move(ints)), {}, remote::gradients_from);
      },
      [=](apply_atom, int layer, const std::vector<model::tensor>& summed, double divisor) -> caf::result<bool> {
        return ask<bool>(self, call(op::apply, {layer}, {divisor}), summed, acknowledged);
      },
      // The holders add among themselves, node to node; the node answers once the sum is held.
      [=](reduce_atom, const reduce_task& t) -> caf::result<sum_held> {
        return ask<sum_held>(self, remote::reduce_call(t), {}, [id](const wire::device_call& r, std::vector<model::tensor>&) -> result<sum_held> {
          if (r.ints.size() != 3 || r.ints[1] < 0 || r.ints[1] > std::numeric_limits<int>::max() || r.ints[2] < 0)
            return make_error("bad_call", "a sum's answer needs its step, layer and bytes received");
          return sum_held{id, r.ints[0], static_cast<int>(r.ints[1]), r.ints[2]};
        });
      },
      [=](commit_atom, std::int64_t step, int layer, double divisor) -> caf::result<bool> {
        return ask<bool>(self, call(op::commit, {step, layer}, {divisor}), {}, acknowledged);
      },
      [=](hash_atom, int layer) -> caf::result<std::uint64_t> {
        return ask<std::uint64_t>(self, call(op::hash, {layer}), {},
                                  [](const wire::device_call& r, std::vector<model::tensor>&) -> result<std::uint64_t> {
                                    if (r.ints.size() != 1) return make_error("bad_call", "a hash reply needs one integer");
                                    return static_cast<std::uint64_t>(r.ints[0]);
                                  });
      },
      [=](copy_atom, int layer) -> caf::result<model::layer_copy> {
        auto m = self->state.hub->model;
        return ask<model::layer_copy>(self, call(op::copy, {layer}), {},
                                      [m](const wire::device_call& r, std::vector<model::tensor>& ts) -> result<model::layer_copy> {
                                        auto l = remote::layer_from(*m, r, ts);
                                        if (!l) return l.err();
                                        return l->replica;
                                      });
      },
      [=](perturb_atom, int layer) { tell(self, call(op::perturb, {layer})); },
      // Fault injection on a node: the whole process dies, as a machine would.
      [=](fail_atom, int after_us) { tell(self, call(op::fail, {after_us})); },
      // The node goes silent: hung, or cut off (its traffic dropped).
      [=](pause_atom, int after_us, double seconds, bool cut_off) {
        tell(self, call(op::pause, {after_us, cut_off ? 1 : 0}, {seconds}));
      },
      // From the node: answers, stage reports, arrivals of migrated layers.
      [=](remote_atom, const wire::device_call& c, std::vector<model::tensor>& ts) {
        auto& s = self->state;
        switch (c.op) {
          case op::error:
            if (c.id == 0) {  // from the hub: the node is lost. Nothing waits in vain.
              s.lost = "device " + std::to_string(id) + ": " + c.text;
              auto pending = std::move(s.pending);
              s.pending.clear();
              std::vector<model::tensor> none;
              for (auto& [k, done] : pending) done(nullptr, none, s.lost);
              if (s.report_to) {
                stage_report r;
                r.device = id;
                r.step = s.step;
                r.error = s.lost;
                self->send(s.report_to, std::move(r));
              }
              return;
            }
            [[fallthrough]];
          case op::reply: {
            auto it = s.pending.find(c.id);
            if (it == s.pending.end()) return;  // the answer to a call nobody waits for any more
            auto done = std::move(it->second);
            s.pending.erase(it);
            done(c.op == op::reply ? &c : nullptr, ts, "device " + std::to_string(id) + ": " + c.text);
            return;
          }
          case op::stage_report: {
            auto r = remote::report_from(c);
            stage_report rep;
            if (r) {
              rep = std::move(*r);
            } else {
              rep.device = id;
              rep.error = r.err().message;
            }
            if (s.report_to) self->send(s.report_to, std::move(rep));
            return;
          }
          case op::moved:
            if (c.ints.size() == 4 && s.migration_sink && !c.text.empty())
              self->send(s.migration_sink, moved_atom::value, static_cast<int>(c.ints[0]), static_cast<int>(c.ints[1]),
                         static_cast<int>(c.ints[2]), c.text);
            else if (c.ints.size() == 4 && s.migration_sink)
              self->send(s.migration_sink, moved_atom::value, static_cast<int>(c.ints[0]), static_cast<int>(c.ints[1]),
                         static_cast<int>(c.ints[2]), static_cast<std::size_t>(c.ints[3]));
            return;
          default:
            return;
        }
      },
  };
}

}  // namespace

caf::actor spawn_remote_device(caf::actor_system& sys, int id, const std::string& route, std::uint64_t gen,
                               std::shared_ptr<remote_devices::impl> hub) {
  return sys.spawn(remote_device, id, route, gen, std::move(hub));
}

}  // namespace dynapar::actors
