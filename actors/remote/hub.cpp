#include "actors/remote/hub.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "actors/remote/hub_state.hpp"
#include "actors/remote/proxy.hpp"
#include "wire/codec.hpp"

namespace dynapar::actors::remote {

using clock = std::chrono::steady_clock;

void remote_devices::impl::post(const std::string& route, const wire::device_call& c, const std::vector<model::tensor>& ts,
                                std::atomic<std::uint64_t>* counted) {
  auto p = remote::pack(c, ts, "controller");
  p.route = route;
  for (const auto& t : ts) *(counted ? counted : &sent) += model::bytes(t);
  if (auto st = out->post(std::move(p)); !st) log->warn("device {}: {}", c.device, st.err().message);
}

void remote_devices::impl::reply(const std::string& route, wire::body b) {
  wire::envelope e;
  e.sender = "controller";
  e.msg = std::move(b);
  comm::packet p;
  p.route = route;
  p.header = wire::encode(e);
  send_out(std::move(p));
}

void remote_devices::impl::send_out(comm::packet p) {
  auto st = comm::send_packet(router, std::move(p), true, true);
  if (st || st.err().code == "unreachable") return;
  if (st.err().code != "full" || dropped_full++ % 1000 == 0)
    log->warn("{} ({} dropped for full queues so far)", st.err().message, dropped_full);
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
      w.reason = "a partition cuts the device's node off from all (--peer is not supported: one link between two nodes)";
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
      it->second.heard(now_s());
      known = true;
    }
  }
  if (!known && !strangers.allow(p.route, now_s())) {
    if (strangers_refused++ % 1000 == 0)
      log->warn("dropped a message from '{}', which has not joined: over the rate such peers may send ({} dropped so far)",
                p.route, strangers_refused.load());
    return;
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
  if (const auto* j = std::get_if<wire::join_msg>(&u->env.msg)) return on_join(p.route, p.peer, *j);
  if (const auto* l = std::get_if<wire::leave_msg>(&u->env.msg))
    return on_leave(p.route, *l, comm::peer_role(p.peer));
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
  if (const auto* h = std::get_if<wire::heartbeat_msg>(&u->env.msg)) {  // seen above; it may prove the data set
    std::lock_guard<std::mutex> lock(mu);
    if (!h->loading) node_data[p.route] = h->data_hash;
    auto& peak = node_peak[p.route];
    peak = std::max(peak, h->peak_rss_mb);
    return;
  }
  auto* c = std::get_if<wire::device_call>(&u->env.msg);
  if (!c) return log->warn("dropped an unexpected message from a node");
  const bool relay = remote::is_data(*c);
  std::lock_guard<std::mutex> lock(mu);
  if (relay) {
    // Between devices, sent before the sender's node knew the target's (nodes send such data
    // to each other directly, mesh.hpp): on to the target's node, frames as they came.
    auto it = devices.find(c->device);
    if (it == devices.end()) return log->warn("dropped a message for device {}, which no node hosts", c->device);
    // Relayed only as the sender's own (docs/SECURITY.md, "Authority on the data plane").
    if (const int source = remote::data_source(*c); source >= 0) {
      const auto from = devices.find(source);
      if (from == devices.end() || from->second.route != p.route || from->second.lost) {
        ++refused_relays;
        return log->warn("dropped data from node '{}' sent as device {}'s, which it does not host ({} refused)", p.route, source, refused_relays);
      }
    }
    p.route = it->second.route;
    for (const auto& t : u->tensors) relayed += model::bytes(t);
    send_out(std::move(p));
    return;
  }
  // A node speaks only for the devices it hosts (docs/SECURITY.md, "Per-node authority"):
  // answers and reports name the device that answers, an arrival the device the layer
  // reached. An error with call id 0 is the controller's own word that a node is lost.
  const auto* moved = std::get_if<wire::ops::moved>(&c->op);
  if (c->id == 0 && std::holds_alternative<wire::ops::error>(c->op))
    return log->warn("dropped an error call with id 0 from node '{}': only this controller says a node is lost", p.route);
  const int speaker = moved ? moved->to : c->device;
  if (auto sp = devices.find(speaker); sp == devices.end() || sp->second.route != p.route || sp->second.lost)
    return log->warn("dropped a message from node '{}' for device {}, which it does not host", p.route, speaker);
  const int to = moved ? moved->from : c->device;  // an arrival goes to the proxy that started the move
  auto it = devices.find(to);
  if (it == devices.end() || !it->second.proxy) return log->warn("dropped an answer for device {}, which no node hosts", to);
  auto& counted = std::holds_alternative<wire::ops::gradient_set>(c->op) ? gradients : gathered;
  for (const auto& t : u->tensors) counted += model::bytes(t);
  caf::anon_send(it->second.proxy, remote_atom::value, std::move(*c), std::move(u->tensors));
}

void remote_devices::impl::loop() {
  auto last_beat = clock::now();
  auto drain = [&] {
    while (true) {
      auto p = comm::recv_packet(pull, true, std::chrono::milliseconds(0));
      if (!p || !*p) return;
      send_out(std::move(**p));
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
    if (membership_changed.exchange(false)) broadcast_peers();
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
  h->layers = model::layer_source::of(h->model);
  for (int l = 0; l < model::num_layers(*h->model); ++l) h->fresh.push_back(model::state_hashes({model::copy_layer(*h->model, l)}).front());
  if (h->cfg.keys) {
    // The handler first: a CURVE socket of a context without one admits every key.
    // Keys admitted in authorized/ after the start count too (a Slurm task makes its own).
    comm::authenticator::reload_fn reload;
    if (!h->cfg.keys->authorized_dir.empty())
      reload = [log = h->log, read = comm::authorized_reloader(h->cfg.keys->authorized_dir, [log = h->log](const std::string& why) {
                  log->warn("authorized keys not read again: {}", why);
                })]() mutable {
        auto keys = read();
        if (keys) log->info("read {} authorized key(s) again", keys->size());
        return keys;
      };
    auto a = comm::authenticator::start(
        h->ctx, h->cfg.keys->authorized, [log = h->log](const std::string& why) { log->warn("{}", why); }, std::move(reload));
    if (!a) return a.err();
    h->auth = std::move(*a);
    if (auto st = comm::make_curve_server(h->router, *h->cfg.keys); !st) return st.err();
  }
  try {
    h->router.set(zmq::sockopt::linger, 1000);
    // Strict, and bounded: a send to a route that is gone or to a full queue fails at once
    // (send_out counts it) instead of vanishing or blocking the network thread.
    h->router.set(zmq::sockopt::router_mandatory, 1);
    h->router.set(zmq::sockopt::sndhwm, comm::queue_messages);
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
  return it != impl_->devices.end() && impl_->present_locked(it->second);
}

std::optional<double> remote_devices::described_memory(int id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(id);
  return it == impl_->devices.end() ? std::nullopt : it->second.described;
}

std::optional<int> remote_devices::described_host(int id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(id);
  return it == impl_->devices.end() ? std::nullopt : it->second.host;
}

bool remote_devices::builds_samples(int id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(id);
  return it != impl_->devices.end() && impl_->holds_data_locked(it->second.route);
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

device_handle remote_devices::proxy(int id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(id);
  if (it == impl_->devices.end()) return {};
  if (!it->second.proxy) it->second.proxy = spawn_remote_device(impl_->sys, id, it->second.route, it->second.gen, impl_);
  return it->second.proxy;
}

std::string remote_devices::endpoint() const { return impl_->endpoint; }

std::map<std::string, double> remote_devices::tensor_bytes() const {
  return {{"relayed", static_cast<double>(impl_->relayed.load())},
          {"gathered", static_cast<double>(impl_->gathered.load())},
          {"sent", static_cast<double>(impl_->sent.load())},
          {"inputs", static_cast<double>(impl_->inputs.load())},
          {"gradients", static_cast<double>(impl_->gradients.load())}};
}

std::map<std::string, double> remote_devices::node_peak_rss_mb() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->node_peak;
}

std::uint64_t remote_devices::strangers_refused() const { return impl_->strangers_refused.load(); }

std::set<int> remote_devices::present_ids() const {
  std::set<int> out;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& [id, e] : impl_->devices)
    if (impl_->present_locked(e)) out.insert(id);
  return out;
}

}  // namespace dynapar::actors::remote
