#include "actors/node_host.hpp"

#include <signal.h>
#include <unistd.h>

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "actors/device_actor.hpp"
#include "actors/remote_protocol.hpp"
#include "comm/curve.hpp"
#include "logging/logging.hpp"
#include "wire/codec.hpp"

namespace dynapar::actors {
namespace {

using clock = std::chrono::steady_clock;
using op = wire::device_op;
constexpr const char* outbox_address = "inproc://dynapar-node-outbox";

struct node_shared {
  std::unique_ptr<comm::outbox> out;
  // Fault injection: until then the node is silent; hung (nothing handled, sent or
  // received) or cut off (what comes and goes is dropped).
  std::atomic<std::int64_t> silent_until_us{0};
  std::atomic<bool> cut_off{false};
  std::shared_ptr<const model::model_chain> model;
  std::atomic<int> live{0};
  std::string name;
  void post(const wire::device_call& c, const std::vector<model::tensor>& ts = {}) {
    if (auto st = out->post(remote::pack(c, ts, name)); !st) logging::get("node")->warn("{}", st.err().message);
  }
  void answer(const wire::device_call& to, wire::device_call c, const std::vector<model::tensor>& ts = {}) {
    c.op = op::reply;
    c.id = to.id;
    c.device = to.device;
    post(c, ts);
  }
  void fail(const wire::device_call& to, const std::string& why) {
    wire::device_call c;
    c.op = op::error;
    c.id = to.id;
    c.device = to.device;
    c.text = remote::clip(why);
    post(c);
  }
};

// Stands for a device on another node: what a device sends it goes out as a call.
caf::behavior peer_stub(caf::event_based_actor*, int target, std::shared_ptr<node_shared> sh) {
  auto tensor_call = [=](op kind, std::int64_t step, int micro, const model::tensor& t) {
    wire::device_call c;
    c.op = kind;
    c.device = target;
    c.ints = {step, micro};
    sh->post(c, {t});
  };
  return {
      [=](act_atom, std::int64_t step, int micro, const model::tensor& t) { tensor_call(op::activation, step, micro, t); },
      [=](grad_atom, std::int64_t step, int micro, const model::tensor& t) { tensor_call(op::gradient, step, micro, t); },
      [=](hold_atom, const layer_transfer& x) {
        std::vector<model::tensor> ts;
        auto c = remote::layer_call(target, x.layer, x.from, x.to, x.bytes, x.replica, ts);
        sh->post(c, ts);
      },
  };
}

// Stands for the controller process: stage reports and arrivals go back to it.
caf::behavior upstream_stub(caf::event_based_actor*, std::shared_ptr<node_shared> sh) {
  return {
      [=](const stage_report& r) { sh->post(remote::report_call(r)); },
      [=](moved_atom, int layer, int from, int to, std::size_t bytes) {
        wire::device_call c;
        c.op = op::moved;
        c.device = from;
        c.ints = {layer, from, to, static_cast<std::int64_t>(bytes)};
        sh->post(c);
      },
      [=](moved_atom, int layer, int from, int to, const std::string& refused) {  // the target is out of memory
        wire::device_call c;
        c.op = op::moved;
        c.device = from;
        c.ints = {layer, from, to, -1};
        c.text = remote::clip(refused);
        sh->post(c);
      },
  };
}

struct bridge_state {
  std::shared_ptr<node_shared> sh;
  std::map<int, caf::actor> devices, peers;
  caf::actor upstream;
  static inline const char* name = "node_bridge";
};
using bridge = caf::stateful_actor<bridge_state>;

caf::actor resolve(bridge* self, int id) {
  auto& s = self->state;
  if (auto it = s.devices.find(id); it != s.devices.end()) return it->second;  // same node: in-process hand-off
  auto& p = s.peers[id];
  if (!p) p = self->spawn(peer_stub, id, s.sh);
  return p;
}

void on_call(bridge* self, const wire::device_call& c, std::vector<model::tensor>& ts) {
  auto& s = self->state;
  auto sh = s.sh;
  auto it = s.devices.find(c.device);
  if (it == s.devices.end()) {
    if (c.id != 0) sh->fail(c, "device " + std::to_string(c.device) + " is not on node " + sh->name);
    return;
  }
  const caf::actor dev = it->second;
  auto on_error = [sh, c](caf::error& e) { sh->fail(c, to_string(e)); };
  auto ack = [sh, c](bool) { sh->answer(c, {}); };
  auto layer_arg = [&](std::size_t n) -> bool {
    if (c.ints.size() == n) return true;
    if (c.id != 0) sh->fail(c, "expected " + std::to_string(n) + " integers");
    return false;
  };
  switch (c.op) {
    case op::hold: {
      auto lm = remote::layer_from(*sh->model, c, ts);
      if (!lm) return c.id != 0 ? sh->fail(c, lm.err().message) : logging::get("node")->warn("{}", lm.err().message);
      if (lm->from < 0) {
        self->request(dev, caf::infinite, hold_atom::value, lm->layer, lm->replica).then(ack, on_error);
      } else {
        self->send(dev, hold_atom::value, layer_transfer{lm->layer, lm->from, lm->to, lm->replica, lm->bytes, s.upstream});
      }
      return;
    }
    case op::migrate: {
      if (!layer_arg(2) || c.reals.size() < 2) return;
      const int to = static_cast<int>(c.ints[1]);
      self->request(dev, caf::infinite, migrate_atom::value, static_cast<int>(c.ints[0]), to, resolve(self, to),
                    remote::link_from(c.reals, 0), s.upstream)
          .then(ack, on_error);
      return;
    }
    case op::drop:
      if (layer_arg(1)) self->send(dev, drop_atom::value, static_cast<int>(c.ints[0]));
      return;
    case op::perturb:
      if (layer_arg(1)) self->send(dev, perturb_atom::value, static_cast<int>(c.ints[0]));
      return;
    case op::speed:
      if (c.reals.size() == 1) self->send(dev, speed_atom::value, c.reals[0]);
      return;
    case op::memory:
      if (c.reals.size() == 1) self->send(dev, memory_atom::value, c.reals[0]);
      return;
    case op::timing:
      if (c.reals.size() % 4 == 0) self->send(dev, timing_atom::value, c.reals);
      return;
    case op::probe:
      self->request(dev, caf::infinite, probe_atom::value)
          .then([sh, c](double v) { sh->answer(c, [&] { wire::device_call r; r.reals = {v}; return r; }()); }, on_error);
      return;
    case op::step: {
      auto task = remote::step_from(c, ts);
      if (!task) {
        stage_report r;
        r.device = c.device;
        r.error = task.err().message;
        return sh->post(remote::report_call(r));
      }
      if (task->prev_id >= 0) task->prev = resolve(self, task->prev_id);
      if (task->next_id >= 0) task->next = resolve(self, task->next_id);
      task->report_to = s.upstream;
      self->send(dev, step_atom::value, std::move(*task));
      return;
    }
    case op::activation:
    case op::gradient:
      if (c.ints.size() != 2 || ts.size() != 1) return logging::get("node")->warn("a malformed activation or gradient was dropped");
      if (c.op == op::activation) self->send(dev, act_atom::value, c.ints[0], static_cast<int>(c.ints[1]), ts[0]);
      else self->send(dev, grad_atom::value, c.ints[0], static_cast<int>(c.ints[1]), ts[0]);
      return;
    case op::gradients: {
      if (c.ints.empty()) return sh->fail(c, "gradients need the step's tag");
      std::vector<int> layers(c.ints.begin() + 1, c.ints.end());
      self->request(dev, caf::infinite, grads_atom::value, c.ints[0], layers)
          .then(
              [sh, c](device_gradients& g) {
                std::vector<model::tensor> out;
                auto r = remote::gradients_reply(g, out);
                sh->answer(c, r, out);
              },
              on_error);
      return;
    }
    case op::apply:
      if (!layer_arg(1) || c.reals.size() != 1) return;
      self->request(dev, caf::infinite, apply_atom::value, static_cast<int>(c.ints[0]), ts, c.reals[0]).then(ack, on_error);
      return;
    case op::hash:
      if (!layer_arg(1)) return;
      self->request(dev, caf::infinite, hash_atom::value, static_cast<int>(c.ints[0]))
          .then(
              [sh, c](std::uint64_t h) {
                wire::device_call r;
                r.ints = {static_cast<std::int64_t>(h)};
                sh->answer(c, r);
              },
              on_error);
      return;
    case op::copy:
      if (!layer_arg(1)) return;
      self->request(dev, caf::infinite, copy_atom::value, static_cast<int>(c.ints[0]))
          .then(
              [sh, c](model::layer_copy& l) {
                std::vector<model::tensor> out;
                auto r = remote::layer_call(c.device, static_cast<int>(c.ints[0]), c.device, -1, 0, l, out);
                sh->answer(c, r, out);
              },
              on_error);
      return;
    case op::fail: {
      // Fault injection: this process dies with SIGKILL, its devices with it, unannounced.
      const auto after = std::chrono::microseconds(c.ints.empty() ? 0 : std::max<std::int64_t>(0, c.ints[0]));
      logging::get("node")->warn("fault injection: node {} is killed in {} us", sh->name, after.count());
      std::thread([after] {
        std::this_thread::sleep_for(after);
        ::raise(SIGKILL);
      }).detach();
      return;
    }
    case op::pause: {
      if (c.ints.size() != 2 || c.reals.size() != 1 || !(c.reals[0] > 0)) return;
      const auto after = std::chrono::microseconds(std::max<std::int64_t>(0, c.ints[0]));
      const bool cut = c.ints[1] != 0;
      const double seconds = std::min(c.reals[0], 3600.0);
      logging::get("node")->warn("fault injection: node {} goes silent ({}) for {:.1f} s in {} us", sh->name,
                                 cut ? "cut off" : "hung", seconds, after.count());
      std::thread([sh, after, cut, seconds] {
        std::this_thread::sleep_for(after);
        sh->cut_off = cut;
        const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
        sh->silent_until_us = std::chrono::duration_cast<std::chrono::microseconds>(until.time_since_epoch()).count();
      }).detach();
      return;
    }
    case op::retire:
      self->send_exit(dev, caf::exit_reason::user_shutdown);
      s.devices.erase(c.device);
      --sh->live;
      return;
    default:
      if (c.id != 0) sh->fail(c, "a node does not take this call");
      return;
  }
}

caf::behavior node_bridge(bridge* self, std::shared_ptr<node_shared> sh, std::map<int, caf::actor> devices) {
  self->state.sh = sh;
  self->state.devices = std::move(devices);
  self->state.upstream = self->spawn(upstream_stub, sh);
  return {
      [=](remote_atom, const wire::device_call& c, std::vector<model::tensor>& ts) { on_call(self, c, ts); },
  };
}

wire::envelope envelope_of(const std::string& sender, wire::body b) {
  wire::envelope e;
  e.sender = sender;
  e.msg = std::move(b);
  return e;
}

status send_body(zmq::socket_t& s, const std::string& sender, wire::body b) {
  comm::packet p;
  p.header = wire::encode(envelope_of(sender, std::move(b)));
  return comm::send_packet(s, std::move(p), false);
}

// The controller's welcome (or refusal), skipping heartbeats; an error when none comes in time
// or, over CURVE, as soon as the handshake fails.
result<wire::welcome_msg> await_welcome(zmq::socket_t& s, const std::string& controller, double timeout_s,
                                        comm::handshake_watch& watch) {
  const auto until = clock::now() + std::chrono::duration<double>(timeout_s);
  while (clock::now() < until) {
    if (auto why = watch.failure()) return make_error("auth", controller + ": " + *why);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now());
    auto p = comm::recv_packet(s, false, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(100)));
    if (!p) return p.err();
    if (!*p) continue;
    auto env = wire::decode((*p)->header.data(), (*p)->header.size());
    if (!env) return make_error(env.err().code, "the controller at " + controller + " answered: " + env.err().message);
    // A request to join again sent before our join arrived is answered by that join.
    if (auto* w = std::get_if<wire::welcome_msg>(&env->msg); w && !w->rejoin) return *w;
  }
  return make_error("unreachable", "no answer from a controller at " + controller + " within " + std::to_string(timeout_s) +
                                       " s (is `dynapar controller` running there, with that address?)");
}

// What the node loads for the controller's model: a built-in name as it is; a TorchScript
// file only from --model-dir (when given) and only if its bytes hash to the Welcome's.
result<std::string> model_source(const node_config& cfg, const wire::welcome_msg& w) {
  if (!model::is_torchscript(w.model)) return w.model;
  const auto file = cfg.model_dir.empty() ? w.model : cfg.model_dir + "/" + w.model.substr(w.model.rfind('/') + 1);
  if (w.model_hash.empty())
    return make_error("refused_model", "the controller names the TorchScript model " + w.model + " without its hash: not loading it");
  auto hash = comm::file_sha256(file);
  if (!hash) return make_error("refused_model", "the controller's model " + w.model + ": " + hash.err().message);
  if (*hash != w.model_hash)
    return make_error("refused_model", "the model file " + file + " hashes to " + hash->substr(0, 16) + "..., not the controller's " +
                                           w.model_hash.substr(0, 16) + "...: not loading it");
  return file;
}

}  // namespace

namespace {

// One hosting of this node's devices, from the controller's welcome until every device is
// retired (done), the controller asks for a rejoin (it restarted, or it declared this node
// lost), or the controller goes silent (an error).
enum class session_end { done, rejoin };

result<session_end> serve(const node_config& cfg, const std::atomic<bool>& leave, zmq::context_t& ctx, zmq::socket_t& dealer,
                          zmq::socket_t& pull, comm::handshake_watch& watch, const std::string& name, node_outcome& out) {
  auto log = logging::get("node");
  if (auto st = send_body(dealer, name, wire::join_msg{name, cfg.devices}); !st) return st.err();
  auto w = await_welcome(dealer, cfg.controller, cfg.connect_timeout_s, watch);
  if (!w) return w.err();
  if (!w->accepted) return make_error("refused", "the controller refused node '" + name + "': " + w->reason);
  auto source = model_source(cfg, *w);
  if (!source) return source.err();
  auto m = model::make_model(*source, w->seed);
  if (!m) return make_error(m.err().code, "the controller's model: " + m.err().message);
  model::optimizer_config opt{w->optimizer, w->lr, w->momentum, w->weight_decay};
  log->info("node '{}' joined {} with {} device(s) ({})", name, cfg.controller, w->devices.size(), w->model);

  auto sh = std::make_shared<node_shared>();
  sh->out = std::make_unique<comm::outbox>(ctx, outbox_address);
  sh->model = *m;
  sh->name = name;
  out.devices = static_cast<int>(w->devices.size());
  caf::actor_system_config cc;
  cc.set("scheduler.max-threads", static_cast<std::size_t>(std::max(1, cfg.scheduler_threads)));
  cc.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cc};
  std::map<int, caf::actor> devices;
  for (int id : w->devices) devices[id] = spawn_device(sys, {id, opt, 1.0, 0, cfg.place});
  sh->live = static_cast<int>(devices.size());
  auto b = sys.spawn(node_bridge, sh, devices);
  auto last_heard = clock::now(), last_beat = clock::now();
  bool leave_sent = false;
  std::optional<error> failure;
  session_end end = session_end::done;
  while (sh->live > 0) {
    const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(clock::now().time_since_epoch()).count();
    const bool silent = now_us < sh->silent_until_us;
    if (silent && !sh->cut_off) {  // hung: nothing moves (not polling, which would spin on what waits)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    zmq::pollitem_t items[] = {{static_cast<void*>(dealer), 0, ZMQ_POLLIN, 0}, {static_cast<void*>(pull), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(50));
    while (true) {  // what the actors posted
      auto p = comm::recv_packet(pull, true, std::chrono::milliseconds(0));
      if (!p || !*p) break;
      if (silent) continue;  // cut off: lost on the way
      if (auto st = comm::send_packet(dealer, std::move(**p), false); !st) log->warn("{}", st.err().message);
    }
    while (true) {
      auto p = comm::recv_packet(dealer, false, std::chrono::milliseconds(0));
      if (!p) {
        log->warn("dropped a message: {}", p.err().message);
        continue;
      }
      if (!*p) break;
      if (silent) continue;
      last_heard = clock::now();
      auto u = remote::unpack(**p);
      if (!u) {
        log->warn("dropped a message from the controller: {}", u.err().message);
        continue;
      }
      if (auto* c = std::get_if<wire::device_call>(&u->env.msg)) {
        ++out.calls;
        caf::anon_send(b, remote_atom::value, std::move(*c), std::move(u->tensors));
      } else if (auto* lw = std::get_if<wire::welcome_msg>(&u->env.msg)) {
        if (lw->rejoin) {
          log->warn("{}", lw->reason);
          end = session_end::rejoin;
          break;
        }
        if (leave_sent) log->info("the controller: {}", lw->reason);
      }
    }
    if (end == session_end::rejoin) break;
    if (silent) continue;
    if (leave && !leave_sent) {
      log->info("leaving: the controller retires this node's devices after the current step");
      (void)send_body(dealer, name, wire::leave_msg{name, {}, "signal"});
      leave_sent = true;
      out.left = true;
    }
    if (clock::now() - last_beat > std::chrono::duration<double>(cfg.heartbeat_s)) {
      last_beat = clock::now();
      (void)send_body(dealer, name, wire::heartbeat_msg{name, 0});
    }
    if (clock::now() - last_heard > std::chrono::duration<double>(cfg.controller_timeout_s)) {
      failure = make_error("controller_lost", "no word from the controller at " + cfg.controller + " for " +
                                                  std::to_string(cfg.controller_timeout_s) + " s; stopping this node");
      break;
    }
  }
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  for (auto& [id, d] : devices) caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
  sys.await_all_actors_done();
  // What this session's actors posted last is stale for the next one.
  while (true) {
    auto p = comm::recv_packet(pull, true, std::chrono::milliseconds(0));
    if (!p || !*p) break;
  }
  if (failure) return *failure;
  return end;
}

}  // namespace

result<node_outcome> run_node(const node_config& cfg, const std::atomic<bool>& leave) {
  auto log = logging::get("node");
  if (auto st = comm::check_endpoint(cfg.controller, cfg.allow_remote, cfg.keys.has_value()); !st) return st.err();
  if (cfg.devices.empty()) return make_error("bad_node", "a node needs at least one --device");
  const std::string name = cfg.name.empty() ? "node-" + std::to_string(::getpid()) : cfg.name;
  zmq::context_t ctx{1};
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer), pull(ctx, zmq::socket_type::pull);
  dealer.set(zmq::sockopt::routing_id, name);
  dealer.set(zmq::sockopt::linger, 1000);
  if (cfg.keys)
    if (auto st = comm::make_curve_client(dealer, *cfg.keys); !st) return st.err();
  comm::handshake_watch watch(ctx, dealer, cfg.keys.has_value());
  pull.bind(outbox_address);
  dealer.connect(cfg.controller);
  node_outcome out;
  while (true) {
    auto end = serve(cfg, leave, ctx, dealer, pull, watch, name, out);
    if (!end) return end.err();
    if (*end == session_end::done) break;
    ++out.rejoins;
    log->info("node '{}' joins again with fresh devices", name);
  }
  log->info("node '{}': all devices retired", name);
  return out;
}

namespace {
// One request to the controller from a short-lived client, answered with a Welcome.
status ask_controller(const control_client& c, const std::string& name, wire::body b) {
  if (auto st = comm::check_endpoint(c.controller, c.allow_remote, c.keys.has_value()); !st) return st;
  zmq::context_t ctx{1};
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  if (c.keys)
    if (auto st = comm::make_curve_client(s, *c.keys); !st) return st;
  comm::handshake_watch watch(ctx, s, c.keys.has_value());
  s.connect(c.controller);
  if (auto st = send_body(s, name, std::move(b)); !st) return st;
  auto w = await_welcome(s, c.controller, c.timeout_s, watch);
  if (!w) return w.err();
  if (!w->accepted) return make_error("refused", "the controller refused: " + w->reason);
  return ok_status();
}
}  // namespace

status request_leave(const control_client& c, const std::vector<int>& devices) {
  if (devices.empty()) return make_error("bad_node", "--leave needs the --device ids to retire");
  const std::string name = "leave-" + std::to_string(::getpid());
  return ask_controller(c, name, wire::leave_msg{name, devices, "dynapar node --leave"});
}

status request_fault(const control_client& c, const wire::fault_command& f) {
  if (auto st = wire::validate_body(f); !st) return st;
  return ask_controller(c, "inject-" + std::to_string(::getpid()), f);
}

}  // namespace dynapar::actors
