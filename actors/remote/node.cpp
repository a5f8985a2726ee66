#include "actors/remote/node.hpp"

#include <signal.h>
#include <unistd.h>

#include <caf/all.hpp>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <thread>

#include "actors/device_actor.hpp"
#include "actors/remote/node_bridge.hpp"
#include "actors/remote/mesh.hpp"
#include "actors/remote/frames.hpp"
#include "comm/curve.hpp"
#include "common/memory_peak.hpp"
#include "data/source.hpp"
#include "logging/logging.hpp"
#include "wire/codec.hpp"

namespace dynapar::actors::remote {
namespace {

using clock = std::chrono::steady_clock;
constexpr const char* outbox_address = "inproc://dynapar-node-outbox";

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
                                        comm::handshake_watch& watch, const std::atomic<bool>* leave = nullptr) {
  const auto until = clock::now() + std::chrono::duration<double>(timeout_s);
  while (clock::now() < until) {
    if (auto why = watch.failure()) return make_error("auth", controller + ": " + *why);
    // A SIGTERM (a scancel, a stop) before the controller answered: nothing to hand back.
    if (leave && *leave) return make_error("left", "asked to leave before the controller at " + controller + " answered");
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

// The job's training and validation sets, loaded here so that a step's and an evaluation's
// inputs need only sample ids on the wire, with the fingerprint to prove in heartbeats: the
// controller's when this node's copies have the same bytes, else 0 (and the controller keeps
// sending tensors).
struct loaded_data {
  std::uint64_t hash = 0;
  std::shared_ptr<const data::dataset> train, val;
};

loaded_data load_data(const node_config& cfg, const wire::welcome_msg& w) {
  if (w.data_hash == 0 || w.data.empty()) return {};
  auto log = logging::get("node");
  auto src = data::decode(w.data);
  if (!src) {
    log->warn("the controller's data source: {}; it sends each step's inputs instead", src.err().message);
    return {};
  }
  src->seed = w.seed;
  src->synthetic_samples = w.data_samples;
  // A controller names a folder of the user's files; the node reads the folder of that name in
  // its own --data-dir, never a path the controller chose (docs/SECURITY.md).
  if (!src->path.empty()) {
    if (cfg.data_dir.empty()) {
      log->warn("the controller names data files ({}); this node reads data files only with --data-dir: the controller sends each "
                "step's inputs instead",
                src->path);
      return {};
    }
    std::filesystem::path named(src->path);
    if (!named.has_filename()) named = named.parent_path();
    if (named.filename() == "." || named.filename() == ".." || named.filename().empty()) {
      log->warn("the controller names data files as '{}', not a folder's name: the controller sends each step's inputs instead", src->path);
      return {};
    }
    src->path = (std::filesystem::path(cfg.data_dir) / named.filename()).string();
  }
  const auto load = cfg.load_data ? cfg.load_data : model::load_data;
  auto d = load(*src, true);
  auto v = d ? load(*src, false) : d;
  if (!d || !v) {
    log->warn("the job's data set '{}': {}; the controller sends each step's inputs instead", src->kind, (d ? v : d).err().message);
    return {};
  }
  const auto h = data::fingerprint(*d, *v);
  if (h != w.data_hash) {
    log->warn("this node's copy of '{}' differs from the controller's (fingerprint {:x}, not {:x}); the controller sends each "
              "step's inputs instead",
              src->kind, h, w.data_hash);
    return {};
  }
  return {h, std::make_shared<const data::dataset>(std::move(*d)), std::make_shared<const data::dataset>(std::move(*v))};
}

}  // namespace

namespace {

// One hosting of this node's devices, from the controller's welcome until every device is
// retired (done), the controller asks for a rejoin (it restarted, or it declared this node
// lost), or the controller goes silent (an error).
enum class session_end { done, rejoin };

result<session_end> serve(const node_config& cfg, const std::atomic<bool>& leave, zmq::context_t& ctx, zmq::socket_t& dealer,
                          zmq::socket_t& pull, node_mesh& mesh, comm::handshake_watch& watch, const std::string& name,
                          node_outcome& out) {
  auto log = logging::get("node");
  mesh.forget();
  if (auto st = send_body(dealer, name, wire::join_msg{name, cfg.devices, mesh.endpoint()}); !st) return st.err();
  auto w = await_welcome(dealer, cfg.controller, cfg.connect_timeout_s, watch, &leave);
  if (!w && w.err().code == "left") {
    log->info("node '{}' {}: it hosted nothing yet, so it stops", name, w.err().message);
    out.left = true;
    return session_end::done;
  }
  if (!w) return w.err();
  if (!w->accepted) return make_error("refused", "the controller refused node '" + name + "': " + w->reason);
  auto source = model_source(cfg, *w);
  if (!source) return source.err();
  auto m = model::layer_source::open(*source, w->seed);
  if (!m) return make_error(m.err().code, "the controller's model: " + m.err().message);
  model::optimizer_config opt{w->optimizer, w->lr, w->momentum, w->weight_decay, w->nesterov, w->schedule, w->label_smoothing, 0, w->bf16,
                              cfg.offload_dir};
  if (auto st = model::check_optimizer(opt); !st) return make_error("refused", "the controller's optimizer: " + st.err().message);
  log->info("node '{}' joined {} with {} device(s) ({})", name, cfg.controller, w->devices.size(), w->model);

  auto sh = std::make_shared<node_shared>();
  sh->out = std::make_unique<comm::outbox>(ctx, outbox_address);
  sh->layers = *m;
  sh->name = name;
  sh->shard_dir = cfg.shard_dir;
  // The data set loads on a thread of its own while this one keeps beating (loading), so that
  // a node busy reading files is not taken for lost; the controller counts its devices in
  // once a beat says the load is over.
  auto loading = std::async(std::launch::async, [&cfg, welcome = *w] { return load_data(cfg, welcome); });
  std::uint64_t data_hash = 0;
  out.devices = static_cast<int>(w->devices.size());
  caf::actor_system_config cc;
  cc.set("scheduler.max-threads", static_cast<std::size_t>(std::max(1, cfg.scheduler_threads)));
  cc.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cc};
  std::map<int, device_handle> devices;
  // Gloo's ring connections (exact: false) use the address the data socket is bound to.
  const auto& data = mesh.endpoint();  // tcp://HOST:PORT
  const auto colon = data.rfind(':');
  const std::string host = data.rfind("tcp://", 0) == 0 && colon > 6 ? data.substr(6, colon - 6) : "127.0.0.1";
  const auto layers = std::make_shared<const model::layer_source>(*m);  // for layers placed from checkpoint shards
  for (int id : w->devices) devices[id] = spawn_device(sys, {id, opt, 1.0, 0, cfg.place, host, 30, layers});
  if (!cfg.offload_dir.empty()) log->info("node '{}': Adam's moments kept in files in '{}' between steps", name, cfg.offload_dir);
  sh->live = static_cast<int>(devices.size());
  auto b = spawn_node_bridge(sys, sh, devices);
  auto last_heard = clock::now(), last_beat = clock::now();
  bool leave_sent = false;
  std::uint64_t full = 0;  // data dropped for a full queue to the controller
  std::optional<error> failure;
  session_end end = session_end::done;
  while (sh->live > 0) {
    const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(clock::now().time_since_epoch()).count();
    const bool silent = now_us < sh->silent_until_us;
    if (silent && !sh->cut_off) {  // hung: nothing moves (not polling, which would spin on what waits)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    zmq::pollitem_t items[] = {{static_cast<void*>(dealer), 0, ZMQ_POLLIN, 0},
                               {static_cast<void*>(pull), 0, ZMQ_POLLIN, 0},
                               {static_cast<void*>(mesh.socket()), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 3, std::chrono::milliseconds(50));
    while (true) {  // what the actors posted
      auto p = comm::recv_packet(pull, true, std::chrono::milliseconds(0));
      if (!p || !*p) break;
      if (silent) continue;  // cut off: lost on the way
      auto& pk = **p;
      if (pk.route.rfind(node_shared::data_route_prefix, 0) == 0) {
        const int device = std::atoi(pk.route.c_str() + std::char_traits<char>::length(node_shared::data_route_prefix));
        pk.route.clear();
        if (mesh.send(device, pk)) continue;  // else through the controller, which relays it
      }
      // Not waiting: a controller that stopped reading must not hold this thread (heartbeats).
      if (auto st = comm::send_packet(dealer, std::move(pk), false, true); !st && (st.err().code != "full" || full++ % 1000 == 0))
        log->warn("{} ({} dropped for a full queue so far)", st.err().message, full);
    }
    // From other nodes; a bounded batch per turn, so that a busy peer cannot starve the
    // controller's messages and the heartbeat.
    for (int n = 0; n < 256; ++n) {
      auto p = mesh.receive(std::chrono::milliseconds(0));
      if (!p) {
        log->warn("dropped data from a peer: {}", p.err().message);
        continue;
      }
      if (!*p) break;
      if (silent) continue;
      auto u = remote::unpack(**p);
      if (!u) {
        log->warn("dropped data from '{}': {}", (*p)->route, u.err().message);
        continue;
      }
      auto* c = std::get_if<wire::device_call>(&u->env.msg);
      if (!c || !remote::is_data(*c)) {
        log->warn("dropped a message from peer '{}': a peer may send only data (activations, gradients, sum chunks, layers)", (*p)->route);
        continue;
      }
      // A peer speaks only for the devices it hosts (docs/SECURITY.md, "Authority on the data plane").
      if (const int sender = remote::data_source(*c); sender >= 0 && !mesh.hosts((*p)->route, sender)) {
        mesh.count_refused();
        log->warn("dropped data from peer '{}' sent as device {}'s, which it does not host", (*p)->route, sender);
        continue;
      }
      caf::anon_send(b, remote_atom::value, std::move(*c), std::move(u->tensors));
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
      } else if (auto* pm = std::get_if<wire::peers_msg>(&u->env.msg)) {
        mesh.update(*pm);
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
    const bool loaded = loading.valid() && loading.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    if (loaded) {  // only calls after this beat name samples (the controller's proof), so the bridge sees the sets
      auto got = loading.get();
      sh->data = std::move(got.train);
      sh->val = std::move(got.val);
      data_hash = got.hash;
    }
    if (loaded || clock::now() - last_beat > std::chrono::duration<double>(cfg.heartbeat_s)) {
      last_beat = clock::now();
      (void)send_body(dealer, name, wire::heartbeat_msg{name, 0, data_hash, peak_rss_mb(), loading.valid()});
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
  // Data that stays in its files is read sample by sample: what this node read, its devices
  // needed (tests/cli/own_data.sh sums it over nodes).
  if (sh->data && sh->data->store)
    log->info("node '{}' read {} samples of the job's {} ({} decoded ahead of their step)", name, sh->data->store->samples_read(), sh->data->size(),
              sh->data->store->read_ahead_figures().ahead);
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
  dealer.set(zmq::sockopt::sndhwm, comm::queue_messages);
  if (cfg.keys)
    if (auto st = comm::make_curve_client(dealer, *cfg.keys); !st) return st.err();
  comm::handshake_watch watch(ctx, dealer, cfg.keys.has_value());
  pull.bind(outbox_address);
  auto mesh = node_mesh::start(ctx, name, mesh_config{cfg.data_bind, cfg.allow_remote, cfg.keys});
  if (!mesh) return mesh.err();
  dealer.connect(cfg.controller);
  node_outcome out;
  while (true) {
    auto end = serve(cfg, leave, ctx, dealer, pull, **mesh, watch, name, out);
    if (!end) return end.err();
    if (*end == session_end::done) break;
    ++out.rejoins;
    log->info("node '{}' joins again with fresh devices", name);
  }
  log->info("node '{}': all devices retired (peak memory {:.1f} MB, {:.1f} MB read through read())", name, peak_rss_mb(), read_mb());
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

}  // namespace dynapar::actors::remote
