#include "actors/remote/over_nodes.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include <caf/all.hpp>

#include "actors/remote/hub.hpp"
#include "actors/session.hpp"
#include "config/job_file.hpp"
#include "data/source.hpp"
#include "launch/processes.hpp"
#include "launch/slurm.hpp"
#include "logging/logging.hpp"
#include "model/collective.hpp"
#include "sim/world.hpp"

namespace dynapar::actors::remote {
namespace {

using clock = std::chrono::steady_clock;

// The devices whose throwaway key device-ID a node started by hand proves when ID is its
// first device (`node_main`): every device of the job, up to a machine's worth (throwaway keys
// serve loopback only). A job file that does not load gets none here: training reports it.
std::vector<int> hand_started_keys(const std::string& job) {
  constexpr std::size_t most = 1024;
  auto j = config::load_job_file(job);
  std::vector<int> ids;
  if (!j) return ids;
  for (const auto& d : j->cluster.cluster.devices)
    if (ids.size() < most) ids.push_back(d.id);
  return ids;
}

}  // namespace

status load_keys(over_nodes_options& o, const std::string& out, const std::string& job) {
  std::string own = o.keys;  // the controller's directory: --keys, or the throwaway one
  if (o.keys.empty() && !o.no_keys) {
    o.keys = out + "/keys";
    if (auto st = comm::write_local_keys(o.keys, o.local_nodes, hand_started_keys(job)); !st) return st;
    own = comm::local_controller_keys(o.keys);
  }
  if (o.keys.empty()) return ok_status();
  auto k = comm::load_server_keys(own);
  if (!k) return k.err();
  o.server = *k;
  return ok_status();
}

namespace {

// Devices the emulated cluster has available at slot 0: the run starts when nodes host them.
std::set<int> starting_devices(const training::prepared_job& p) {
  std::set<int> ids;
  sim::world w(p.settings.emulated);
  for (const auto& d : w.at(0).devices)
    if (d.available) ids.insert(d.id);
  return ids;
}

std::string list(const std::set<int>& ids) {
  std::ostringstream o;
  for (int id : ids) o << (o.tellp() > 0 ? ", " : "") << id;
  return o.str();
}

// exact: false jobs add among the holders through Gloo (c10d's ring all-reduce) where it may
// run: built with Gloo, and not --keys beyond loopback (Gloo's connections are not encrypted;
// the holders' own sum then travels over CURVE). The rendezvous is hosted here, on the host of
// the controller's endpoint.
result<std::unique_ptr<model::gloo_store>> gloo_rendezvous(const training::prepared_job& p, const over_nodes_options& o,
                                                           const std::string& endpoint) {
  if (p.settings.exact || !p.settings.peer_sum || o.inexact_sum == "holders") return std::unique_ptr<model::gloo_store>{};
  const bool may = model::have_gloo() && !(o.server && o.allow_remote);
  if (!may) {
    if (o.inexact_sum == "gloo")
      return make_error("bad_flag", model::have_gloo() ? "--inexact-sum gloo: Gloo's connections are not encrypted, and this run "
                                                         "serves CURVE beyond loopback (use --inexact-sum holders)"
                                                       : "--inexact-sum gloo: this dynapar was built without Gloo (libgloo-dev)");
    logging::get("controller")->info("exact: false: the holders add in holder order (Gloo {})",
                                     model::have_gloo() ? "is not used with keys beyond loopback" : "is not built in");
    return std::unique_ptr<model::gloo_store>{};
  }
  const auto colon = endpoint.rfind(':');
  auto s = model::start_gloo_store(endpoint.substr(6, colon - 6));  // tcp://HOST:PORT
  if (s) logging::get("controller")->info("exact: false: the holders add through Gloo, meeting at {}", (*s)->endpoint());
  return s;
}

}  // namespace

result<training::train_outcome> train_over_nodes(training::prepared_job& p, const training::train_callbacks& cb,
                                                 const over_nodes_options& o) {
  auto log = logging::get("controller");
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(2));
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  remote_config rc;
  rc.bind = o.bind;
  rc.allow_remote = o.allow_remote;
  rc.keys = o.server;
  rc.node_timeout_s = o.node_timeout_s;
  rc.max_frame_bytes = training::frame_cap_bytes(p);
  log->info("frames above {:.1f} MiB disconnect their sender (twice this job's largest tensor, and 16 MiB)",
            double(rc.max_frame_bytes) / (1 << 20));
  rc.model = p.job.model;
  rc.seed = p.job.seed;
  rc.optimizer = p.settings.optimizer;
  rc.data = p.job.data;
  if (!o.send_inputs) rc.data_hash = data::fingerprint(p.train_set, p.test_set);
  for (const auto& d : p.cluster.devices) rc.devices.insert(d.id);
  // Local nodes host their devices on the CPU; a GPU device needs a node on its machine
  // started with --place (docs/GPU.md).
  if (o.local_nodes > 0 && !p.job.cluster.places.empty())
    return make_error("bad_flag", "--local starts CPU nodes, but job '" + p.job.name +
                                      "' places devices on GPUs: start those nodes with `dynapar node --place cuda:N`");
  auto remote = remote_devices::start(sys, p.model, rc);
  if (!remote) return remote.err();
  log->info("listening on {}", (*remote)->endpoint());
  if (!o.address_file.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    auto address = launch::advertised_endpoint((*remote)->endpoint(), host);
    if (!address) return address.err();
    if (auto st = launch::write_file_atomically(o.address_file, *address + "\n"); !st) return st.err();
    log->info("wrote the address nodes dial, {}, to {}", *address, o.address_file);
  }
  // Local nodes read the job's own data files where this process does (a node started by
  // hand reads them only with --data-dir: docs/SECURITY.md, "What a node loads").
  std::vector<std::string> node_args;
  if (!p.job.data.path.empty()) {
    auto folder = std::filesystem::absolute(p.job.data.path).lexically_normal();
    if (!folder.has_filename()) folder = folder.parent_path();
    node_args = {"--data-dir", folder.parent_path().string()};
  }
  // They write checkpoint shards where this process commits them (docs/SECURITY.md, "Shards").
  if (!cb.shard_root.empty()) node_args.insert(node_args.end(), {"--shard-dir", cb.shard_root});
  launch::posix_nodes os((*remote)->endpoint(), o.keys, node_args);
  const bool described = p.job.cluster.described;
  if (described && !o.local_devices.empty())
    return make_error("bad_flag", "--devices names the job's devices for the local nodes, and job '" + p.job.name + "' lists none");
  launch::supervisor_config sc;
  sc.nodes = o.local_nodes;
  sc.only = o.local_devices;
  sc.respawn_s = o.respawn_s;
  sc.described = described;
  launch::node_supervisor kids(os, sc, rc.devices);
  kids.start();
  const auto t0 = clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const auto need = starting_devices(p);
  // A job without devices starts once its local nodes' devices (or --min-devices, default 1)
  // joined; the rest of its pool joins as nodes come.
  const std::size_t by_default = described ? std::max<std::size_t>(1, static_cast<std::size_t>(o.local_nodes)) : need.size();
  const std::size_t enough = std::min<std::size_t>(o.min_devices > 0 ? o.min_devices : by_default, need.size());
  const auto until = clock::now() + std::chrono::duration<double>(o.wait_s);
  if (described) log->info("waiting for {} device(s) to join, described by their nodes (dynapar node --devices auto)", enough);
  else log->info("waiting for nodes hosting {} of devices {}", enough, list(need));
  while (true) {
    const auto have = (*remote)->present_ids();
    std::set<int> missing;
    for (int id : need)
      if (!have.count(id)) missing.insert(id);
    if (need.size() - missing.size() >= enough) break;
    if (auto crashed = kids.poll(now_s()); !crashed.empty()) {
      kids.kill_rest();
      return make_error("node_failed", crashed.front() + " before training started");
    }
    if (clock::now() > until) {
      kids.kill_rest();
      if (described)
        return make_error("no_nodes", std::to_string(need.size() - missing.size()) + " of the " + std::to_string(enough) +
                                          " device(s) needed joined within " + std::to_string(o.wait_s) +
                                          " s (start nodes with: dynapar node --controller " + (*remote)->endpoint() + " --devices auto)");
      return make_error("no_nodes", "no node hosts device(s) " + list(missing) + " after " + std::to_string(o.wait_s) +
                                        " s (start them with: dynapar node --controller " + (*remote)->endpoint() + " --device ID)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cluster_actors a;
  a.remote = *remote;
  // --respawn-s: a node that crashed (killed, or exited with an error) is started again, as a
  // machine's replacement would be; its devices join at the next slot.
  std::atomic<bool> trained{false};
  std::thread keeper;
  if (o.respawn_s >= 0)
    keeper = std::thread([&] {
      while (!trained) {
        for (const auto& line : kids.poll(now_s())) log->info("{}", line);
        for (const auto& name : kids.respawn(now_s(), [&](int id) { return (*remote)->hosted(id); }))
          log->info("restarting crashed node as '{}'", name);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  // Between processes the holders add their gradients among themselves, node to node, unless
  // asked to gather them here (--central-sum, for comparison).
  p.settings.peer_sum = !o.central_sum;
  auto store = gloo_rendezvous(p, o, (*remote)->endpoint());
  if (!store) return store.err();
  if (*store) p.settings.gloo_store = (*store)->endpoint();
  // Without --respawn-s, once every node process started here has exited nothing replaces
  // them: a run waiting for devices ends then, not rejoin_wait_s later.
  auto callbacks = cb;
  if (o.respawn_s < 0)
    callbacks.no_replacements = [&] {
      (void)kids.poll(now_s());
      return kids.all_ended() ? std::string("every node process this launch started has exited (--respawn-s restarts them)") : std::string();
    };
  auto out = actors::train(sys, a, *p.model, p.train_set, p.settings, callbacks);
  if (out) {
    out->controller_tensor_bytes = (*remote)->tensor_bytes();
    out->node_peak_rss_mb = (*remote)->node_peak_rss_mb();
  }
  trained = true;
  if (keeper.joinable()) keeper.join();
  // The driver stopped every proxy: their nodes are told to retire their devices.
  sys.await_all_actors_done();
  (*remote)->stop();
  // The nodes exit once their devices are retired: 10 s for that, then they are killed.
  for (const auto until_end = clock::now() + std::chrono::seconds(10); !kids.all_ended() && clock::now() < until_end;) {
    for (const auto& line : kids.poll(now_s())) log->warn("{}", line);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kids.kill_rest();
  return out;
}

}  // namespace dynapar::actors::remote
