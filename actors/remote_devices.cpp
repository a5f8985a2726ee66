#include "actors/remote_devices.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "actors/remote_protocol.hpp"
#include "comm/curve.hpp"
#include "logging/logging.hpp"
#include "wire/codec.hpp"

namespace dynapar::actors {

using clock = std::chrono::steady_clock;

struct remote_devices::impl {
  impl(caf::actor_system& s, std::shared_ptr<const model::model_chain> m, remote_config c)
      : sys(s), model(std::move(m)), cfg(std::move(c)), router(ctx, zmq::socket_type::router), pull(ctx, zmq::socket_type::pull) {}

  caf::actor_system& sys;
  std::shared_ptr<const model::model_chain> model;
  remote_config cfg;
  zmq::context_t ctx{1};
  std::unique_ptr<comm::authenticator> auth;  // with keys: the context's ZAP handler
  zmq::socket_t router, pull;
  std::unique_ptr<comm::outbox> out;
  std::string endpoint;
  std::string model_hash;  // a TorchScript model's SHA-256: nodes check their file against it
  struct entry {
    std::string route;  // the node's identity on the ROUTER
    caf::actor proxy;
    bool leaving = false;
    bool lost = false;  // its node went silent
    std::uint64_t gen = 0;  // which hosting of the device (a lost one may join again)
  };
  std::uint64_t next_gen = 1;
  mutable std::mutex mu;
  std::map<int, entry> devices;
  std::map<std::string, clock::time_point> nodes;  // last heard from
  std::map<std::string, clock::time_point> told_rejoin;  // unknown nodes, when last told to join again
  std::vector<sim::fault> faults;                  // dynapar inject: for the driver
  std::thread net;
  std::atomic<bool> stopping{false};
  std::shared_ptr<spdlog::logger> log = logging::get("remote");

  void post(const std::string& route, const wire::device_call& c, const std::vector<model::tensor>& ts = {}) {
    auto p = remote::pack(c, ts, "controller");
    p.route = route;
    if (auto st = out->post(std::move(p)); !st) log->warn("device {}: {}", c.device, st.err().message);
  }
  void reply(const std::string& route, wire::body b) {
    wire::envelope e;
    e.sender = "controller";
    e.msg = std::move(b);
    comm::packet p;
    p.route = route;
    p.header = wire::encode(e);
    if (auto st = comm::send_packet(router, std::move(p), true); !st) log->warn("{}", st.err().message);
  }
  // A proxy stopped. Its node (if the device is still its node's: a lost node's devices may
  // have joined again from elsewhere) retires the device.
  void retired(int id, std::uint64_t gen) {
    std::string route;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = devices.find(id);
      if (it == devices.end() || it->second.gen != gen) return;
      // A lost node is not told: should it come back, it is asked to join again instead.
      if (!it->second.lost) route = it->second.route;
      devices.erase(it);
    }
    if (route.empty()) return;
    wire::device_call c;
    c.op = wire::device_op::retire;
    c.device = id;
    post(route, c);
  }
  void loop();
  void check_nodes();
  void handle(comm::packet p);
  void on_join(const std::string& route, const wire::join_msg& m);
  void on_leave(const std::string& route, const wire::leave_msg& m);
  void on_fault(const std::string& route, const wire::fault_command& f);
  void refuse(const comm::packet& p, const wire::body& b, const std::string& why);
};

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

void remote_devices::impl::on_join(const std::string& route, const wire::join_msg& m) {
  wire::welcome_msg w;
  std::vector<int> ids;
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!nodes.count(route) && nodes.size() >= cfg.max_routes) problem = "too many nodes (" + std::to_string(nodes.size()) + ")";
    for (const auto& d : m.devices) {
      if (!cfg.devices.count(d.id)) problem = "device " + std::to_string(d.id) + " is not in the job's cluster";
      else if (devices.count(d.id) && !devices.at(d.id).lost)
        problem = "device " + std::to_string(d.id) + " is already hosted by another node";
      ids.push_back(d.id);
    }
  }
  if (!problem.empty()) {
    log->warn("node '{}' refused: {}", m.node, problem);
    w.reason = problem;
    return reply(route, w);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    nodes[route] = clock::now();
    // A lost node's device may join again (a replacement, or the node itself once fenced):
    // it is a new hosting; the old proxy stays lost until the driver stops it.
    for (int id : ids) devices[id] = entry{route, caf::actor{}, false, false, next_gen++};
  }
  w.accepted = true;
  w.devices = ids;
  w.model = cfg.model;
  w.model_hash = model_hash;
  w.seed = cfg.seed;
  w.optimizer = cfg.optimizer.kind;
  w.lr = cfg.optimizer.lr;
  w.momentum = cfg.optimizer.momentum;
  w.weight_decay = cfg.optimizer.weight_decay;
  log->info("node '{}' joined with {} device(s)", m.node, ids.size());
  reply(route, w);
}

void remote_devices::impl::on_leave(const std::string& route, const wire::leave_msg& m) {
  wire::welcome_msg w;
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<int> ids = m.devices;
    if (ids.empty())
      for (const auto& [id, e] : devices)
        if (e.route == route) ids.push_back(id);
    for (int id : ids)
      if (!devices.count(id)) problem = "device " + std::to_string(id) + " is not in the run";
    if (problem.empty())
      for (int id : ids) devices[id].leaving = true;
    w.devices = ids;
  }
  if (!problem.empty()) {
    w.reason = problem;
    w.devices.clear();
  } else {
    w.accepted = true;
    w.model = cfg.model;
    w.reason = "leaving after the current step";
    log->info("'{}' asks devices to leave ({}): {} device(s)", m.node, m.reason, w.devices.size());
  }
  reply(route, w);
}

// Nodes that went silent: their devices are lost (issue 8 recovers from that; today the
// step fails at once with an error naming the node).
void remote_devices::impl::check_nodes() {
  const auto now = clock::now();
  std::vector<std::pair<std::string, caf::actor>> notify;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = nodes.begin(); it != nodes.end();) {
      const double silent = std::chrono::duration<double>(now - it->second).count();
      if (silent <= cfg.node_timeout_s) {
        ++it;
        continue;
      }
      const std::string why = "node '" + it->first + "' lost (no message for " + std::to_string(silent).substr(0, 4) + " s)";
      log->warn("{}", why);
      for (auto& [id, e] : devices)
        if (e.route == it->first && !e.lost) {
          e.lost = true;
          if (e.proxy) notify.emplace_back(why, e.proxy);
        }
      it = nodes.erase(it);
    }
  }
  for (const auto& [why, proxy] : notify) {
    wire::device_call c;
    c.op = wire::device_op::error;
    c.text = why;
    caf::anon_send(proxy, remote_atom::value, std::move(c), std::vector<model::tensor>{});
  }
}

// dynapar inject (docs/RELIABILITY.md). A leave is a graceful departure, taken at once.
// Kill, slow, pause and partition go to the driver, which carries them out at a random
// moment of the next step, as it does the job's fault plan: a kill takes the device's node
// down (SIGKILL), a pause or partition silences it, a slow-down dilates the device.
void remote_devices::impl::on_fault(const std::string& route, const wire::fault_command& f) {
  using k = wire::fault_kind;
  wire::welcome_msg w;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = devices.find(f.device);
    if (f.kind == k::join) {
      w.reason = "a device joins when a node hosting it starts: dynapar node --controller ADDR --device " + std::to_string(f.device);
    } else if (it == devices.end() || it->second.lost) {
      w.reason = "device " + std::to_string(f.device) + " is not in the run";
    } else if (f.kind == k::partition && f.peer >= 0) {
      w.reason = "a partition cuts the device's node off from all (--peer is not supported: links between two nodes go "
                 "through the controller)";
    } else if (f.kind == k::slow && f.duration_steps < 1) {
      w.reason = "a slow-down needs --steps >= 1";
    } else if (f.kind == k::leave) {
      it->second.leaving = true;
    } else if (!it->second.proxy) {
      w.reason = "device " + std::to_string(f.device) + " has not joined the training yet";
    } else {
      sim::fault x;
      x.kind = f.kind == k::kill ? sim::fault_kind::kill
               : f.kind == k::slow ? sim::fault_kind::slow
               : f.kind == k::pause ? sim::fault_kind::pause
                                    : sim::fault_kind::partition;
      x.device = f.device;
      x.factor = f.factor;
      x.steps = f.duration_steps;
      x.seconds = f.duration_s;
      faults.push_back(x);
    }
  }
  if (w.reason.empty()) {
    w.accepted = true;
    w.model = cfg.model;
    w.devices = {f.device};
    w.reason = f.kind == k::leave ? "it leaves after the current step" : "carried out at a random moment of the next step";
    log->warn("fault injected: device {}: {}", f.device, w.reason);
  }
  reply(route, w);
}

// A message its sender's key may not send: dropped; a request (join, leave, inject) hears why.
void remote_devices::impl::refuse(const comm::packet& p, const wire::body& b, const std::string& why) {
  const std::string who = p.peer.empty() ? "an unauthenticated peer" : p.peer;
  log->warn("dropped a message from {}: {}", who, why);
  if (std::holds_alternative<wire::join_msg>(b) || std::holds_alternative<wire::leave_msg>(b) || std::holds_alternative<wire::fault_command>(b)) {
    wire::welcome_msg w;
    w.reason = why + " (this sender is " + who + ")";
    reply(p.route, w);
  }
}

void remote_devices::impl::handle(comm::packet p) {
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = nodes.find(p.route); it != nodes.end()) {
      it->second = clock::now();
      known = true;
    }
  }
  auto u = remote::unpack(p);
  if (!u) {
    log->warn("dropped a message: {}", u.err().message);
    if (u.err().code == "version") {
      wire::welcome_msg w;
      w.reason = u.err().message;
      reply(p.route, w);
    }
    return;
  }
  if (cfg.keys)
    if (auto why = remote::refusal(comm::peer_role(p.peer), u->env.msg)) return refuse(p, u->env.msg, *why);
  if (const auto* j = std::get_if<wire::join_msg>(&u->env.msg)) return on_join(p.route, *j);
  if (const auto* l = std::get_if<wire::leave_msg>(&u->env.msg)) return on_leave(p.route, *l);
  if (const auto* f = std::get_if<wire::fault_command>(&u->env.msg)) return on_fault(p.route, *f);
  if (!known) {
    // A node this controller does not know: it restarted, or it declared the node lost (a
    // pause or partition longer than node_timeout_s). What it sends is stale: dropped. It is
    // told (once a second) to join again, with fresh devices; its old devices are recovered
    // from like crashed ones.
    if (told_rejoin.size() >= cfg.max_routes) told_rejoin.clear();  // a flood of identities: forget, tell again
    auto& told = told_rejoin[p.route];
    if (clock::now() - told > std::chrono::seconds(1)) {
      told = clock::now();
      wire::welcome_msg w;
      w.rejoin = true;
      w.reason = "this controller does not know node '" + p.route + "' (restarted, or it was declared lost): join again";
      log->info("{}", w.reason);
      reply(p.route, w);
    }
    return;
  }
  if (std::holds_alternative<wire::heartbeat_msg>(u->env.msg)) return;  // seen above
  auto* c = std::get_if<wire::device_call>(&u->env.msg);
  if (!c) return log->warn("dropped an unexpected message from a node");
  using op = wire::device_op;
  const bool relay = c->op == op::activation || c->op == op::gradient || (c->op == op::hold && c->ints.size() >= 2 && c->ints[1] >= 0);
  std::lock_guard<std::mutex> lock(mu);
  if (relay) {
    // Between devices: on to the target's node, tensor frames as they came.
    auto it = devices.find(c->device);
    if (it == devices.end()) return log->warn("dropped a message for device {}, which no node hosts", c->device);
    p.route = it->second.route;
    if (auto st = comm::send_packet(router, std::move(p), true); !st) log->warn("{}", st.err().message);
    return;
  }
  const int to = c->op == op::moved && c->ints.size() == 4 ? static_cast<int>(c->ints[1]) : c->device;
  auto it = devices.find(to);
  if (it == devices.end() || !it->second.proxy) return log->warn("dropped an answer for device {}, which no node hosts", to);
  caf::anon_send(it->second.proxy, remote_atom::value, std::move(*c), std::move(u->tensors));
}

void remote_devices::impl::loop() {
  auto last_beat = clock::now();
  auto drain = [&] {
    while (true) {
      auto p = comm::recv_packet(pull, true, std::chrono::milliseconds(0));
      if (!p || !*p) return;
      if (auto st = comm::send_packet(router, std::move(**p), true); !st) log->warn("{}", st.err().message);
    }
  };
  while (!stopping) {
    zmq::pollitem_t items[] = {{static_cast<void*>(router), 0, ZMQ_POLLIN, 0}, {static_cast<void*>(pull), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(50));
    if (items[1].revents & ZMQ_POLLIN) drain();
    if (items[0].revents & ZMQ_POLLIN)
      while (true) {
        auto p = comm::recv_packet(router, true, std::chrono::milliseconds(0));
        if (!p) {
          log->warn("dropped a message: {}", p.err().message);
          continue;
        }
        if (!*p) break;
        handle(std::move(**p));
      }
    if (clock::now() - last_beat > std::chrono::duration<double>(cfg.heartbeat_s)) {
      last_beat = clock::now();
      std::vector<std::string> routes;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& [r, t] : nodes) routes.push_back(r);
      }
      for (const auto& r : routes) reply(r, wire::heartbeat_msg{"controller", 0});
    }
    check_nodes();
  }
  // What the proxies posted last (their devices' retirements) still goes out.
  const auto until = clock::now() + std::chrono::milliseconds(300);
  while (clock::now() < until) {
    zmq::pollitem_t item{static_cast<void*>(pull), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) > 0) drain();
  }
}

result<std::shared_ptr<remote_devices>> remote_devices::start(caf::actor_system& sys, std::shared_ptr<const model::model_chain> m,
                                                              remote_config cfg) {
  if (auto st = comm::check_endpoint(cfg.bind, cfg.allow_remote, cfg.keys.has_value()); !st) return st.err();
  auto h = std::make_shared<impl>(sys, std::move(m), std::move(cfg));
  if (model::is_torchscript(h->cfg.model)) {
    auto hash = comm::file_sha256(h->cfg.model);
    if (!hash) return hash.err();
    h->model_hash = *hash;
  }
  if (h->cfg.keys) {
    // The handler first: a CURVE socket of a context without one admits every key.
    auto a = comm::authenticator::start(h->ctx, h->cfg.keys->authorized, [log = h->log](const std::string& why) { log->warn("{}", why); });
    if (!a) return a.err();
    h->auth = std::move(*a);
    if (auto st = comm::make_curve_server(h->router, *h->cfg.keys); !st) return st.err();
  }
  try {
    h->router.set(zmq::sockopt::linger, 1000);
    h->router.set(zmq::sockopt::router_mandatory, 0);
    h->router.set(zmq::sockopt::maxmsgsize, h->cfg.max_frame_bytes);
    h->router.bind(h->cfg.bind);
    h->endpoint = h->router.get(zmq::sockopt::last_endpoint);
    h->pull.bind("inproc://dynapar-controller-outbox");
  } catch (const zmq::error_t& e) {
    return make_error("bind", "cannot listen on " + h->cfg.bind + ": " + e.what());
  }
  h->out = std::make_unique<comm::outbox>(h->ctx, "inproc://dynapar-controller-outbox");
  h->net = std::thread([raw = h.get()] { raw->loop(); });
  return std::shared_ptr<remote_devices>(new remote_devices(h));
}

remote_devices::~remote_devices() { stop(); }

void remote_devices::stop() {
  if (impl_->net.joinable()) {
    // The run is over: every device still registered (also those that joined too late to be
    // used) is retired, so that its node exits now instead of waiting for silence.
    std::vector<int> left;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      for (const auto& [id, e] : impl_->devices) left.push_back(id);
    }
    for (int id : left) {
      std::uint64_t gen = 0;
      {
        std::lock_guard<std::mutex> lock(impl_->mu);
        if (auto it = impl_->devices.find(id); it != impl_->devices.end()) gen = it->second.gen;
      }
      impl_->retired(id, gen);
    }
    impl_->stopping = true;
    impl_->net.join();
  }
}

bool remote_devices::present(int id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(id);
  return it != impl_->devices.end() && !it->second.leaving && !it->second.lost;
}

bool remote_devices::hosted(int id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->devices.count(id) > 0;
}

std::vector<sim::fault> remote_devices::injected() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::exchange(impl_->faults, {});
}

bool remote_devices::lost(int id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(id);
  return it != impl_->devices.end() && it->second.lost;
}

caf::actor remote_devices::proxy(int id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(id);
  if (it == impl_->devices.end()) return {};
  if (!it->second.proxy) it->second.proxy = impl_->sys.spawn(remote_device, id, it->second.route, it->second.gen, impl_);
  return it->second.proxy;
}

std::string remote_devices::endpoint() const { return impl_->endpoint; }

std::set<int> remote_devices::present_ids() const {
  std::set<int> out;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& [id, e] : impl_->devices)
    if (!e.leaving && !e.lost) out.insert(id);
  return out;
}

}  // namespace dynapar::actors
