// `dynapar controller`, `dynapar node` and `dynapar launch`: the same training as `dynapar
// train`, with the devices in node processes (docs/DISTRIBUTED.md). The controller process
// holds the driver, the controller actor and a proxy per remote device; nodes host the
// device actors. `launch --local N` is the controller plus N node processes on loopback.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "actors/remote/node.hpp"
#include "actors/remote/hub.hpp"
#include "cli_util.hpp"
#include "comm/keys.hpp"
#include "comm/packet.hpp"
#include "commands.hpp"
#include "launch/processes.hpp"
#include "logging/logging.hpp"
#include "node_devices.hpp"
#include "remote_train.hpp"
#include "model/collective.hpp"
#include "train_job.hpp"

namespace dynapar::cli {
namespace {

// --keys DIR for a client: the first of `names` found there (--key-name overrides them).
status load_keys(const std::string& dir, const std::string& key_name, std::vector<std::string> names,
                 std::optional<comm::client_keys>& out) {
  if (dir.empty()) return ok_status();
  if (!key_name.empty()) names = {key_name};
  auto k = comm::load_client_keys(dir, names);
  if (!k) return k.err();
  out = *k;
  return ok_status();
}

std::atomic<bool> leave_requested{false};

// SIGTERM and SIGINT ask the node to leave. They are blocked in every thread (so that no
// ZeroMQ or CAF call is interrupted) and taken by one thread that only waits for them.
void leave_on_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) == 0) leave_requested = true;
  }).detach();
}

int node_main(node_options o) {
  auto devs = node_devices(o, launch::process_env());
  if (!devs) return report(devs.err());
  // A node proves DIR/device-ID.key (ID its first device) where there is one, as the
  // controller's throwaway keys and the Slurm scripts lay out, so that nodes started by hand
  // do not share a key; else DIR/node.key (a node that describes itself knows no id yet). A
  // leave may use an operator's key first.
  std::vector<std::string> names = {"node"};
  if (devs->front().id >= 0) names.insert(names.begin(), "device-" + std::to_string(devs->front().id));
  if (o.leave) names.insert(names.begin(), "operator");
  if (auto st = load_keys(o.keys, o.key_name, names, o.node.keys); !st) return report(st.err());
  if (o.leave) {
    std::vector<int> ids;
    for (const auto& d : *devs) ids.push_back(d.id);
    if (auto st = actors::remote::request_leave({o.node.controller, o.node.connect_timeout_s, o.node.allow_remote, o.node.keys}, ids); !st)
      return report(st.err());
    std::cout << "leave accepted: the devices leave after the current step\n";
    return exit_ok;
  }
  o.node.devices = *devs;
  auto offload = offload_dir_from_env();
  if (!offload) return report(offload.err());
  o.node.offload_dir = *offload;
  if (!o.node.offload_dir.empty() && o.node.place != "cpu")
    return report(make_error("bad_flag", "--offload-optimizer keeps optimizer state in host files; this node's devices compute on " +
                                             o.node.place + " (a GPU's state stays in its memory)"));
  if (auto st = model::check_place(o.node.place); !st) return report(st.err());
  model::set_threads(1);
  leave_on_signals();
  auto r = actors::remote::run_node(o.node, leave_requested);
  if (!r) return report(r.err());
  return exit_ok;
}

void add_controller_flags(CLI::App* sub, controller_options& o) {
  sub->add_option("job", o.train.job, "Job YAML (docs/FORMATS.md)")->required();
  sub->add_option("--out", o.train.run.out, "Directory for metrics.jsonl, plans.jsonl and summary.json");
  add_verify_flags(sub, o.train);
  sub->add_option("--steps", o.train.steps, "Override the job's length")->check(CLI::Range(1, 100000000));
  add_checkpoint_flags(sub, o.train);
  add_step_flags(sub, o.train);
  add_dashboard_flags(sub, o.train);
  sub->add_option("--wait-s", o.wait_s, "Seconds to wait for the nodes hosting the starting devices (default 60)")
      ->check(CLI::Range(0.1, 86400.0));
  sub->add_option("--min-devices", o.min_devices,
                  "Start once nodes host this many of the devices available at slot 0 (default all; for a job without devices, the "
                  "--local nodes' or 1); the others join when their nodes come")
      ->check(CLI::Range(1, 100000));
  sub->add_flag("--allow-remote", o.allow_remote, "Allow a --bind address beyond loopback (needs --keys)");
  sub->add_option("--keys", o.keys,
                  "Serve CURVE with DIR/controller.key, admitting the keys in DIR/authorized/ (default: throwaway keys, the nodes' "
                  "in OUT/keys, which nodes on this machine pass as --keys, the operator's in OUT/keys-operator; docs/SECURITY.md)");
  sub->add_flag("--no-keys", o.no_keys, "Plain TCP on loopback instead of throwaway CURVE keys in OUT/keys");
  sub->add_option("--node-timeout-s", o.node_timeout_s,
                  "Seconds of silence after which a node is lost (default: adapted to each node's gaps between messages, "
                  "0.5-10 s; docs/RELIABILITY.md)")
      ->check(CLI::Range(0.2, 3600.0));
  sub->add_flag("--central-sum", o.central_sum,
                "Gather every holder's gradients here and send the sums back, instead of the holders adding among themselves "
                "(the same bits; for comparison)");
  sub->add_option("--inexact-sum", o.inexact_sum,
                  "exact: false jobs: how the holders add, gloo (c10d's ring all-reduce) or holders (in holder order over "
                  "dynapar's sockets); default auto: Gloo unless built without it or serving CURVE beyond loopback")
      ->check(CLI::IsMember({"auto", "gloo", "holders"}));
  sub->add_flag("--send-inputs", o.send_inputs,
                "Send each step's inputs and targets to the nodes as tensors, instead of sample ids the nodes look up in "
                "their own copy of the data set (for comparison)");
}

struct inject_options {
  std::string controller, kind, keys, key_name;
  int device = -1, steps = 0, peer = -1;
  double factor = 1, seconds = 0, timeout_s = 10;
  bool allow_remote = false;
};

int inject_main(const inject_options& o) {
  static const std::map<std::string, wire::fault_kind> kinds = {
      {"kill", wire::fault_kind::kill},   {"slow", wire::fault_kind::slow}, {"pause", wire::fault_kind::pause},
      {"leave", wire::fault_kind::leave}, {"join", wire::fault_kind::join}, {"partition", wire::fault_kind::partition}};
  wire::fault_command f;
  f.kind = kinds.at(o.kind);
  f.device = o.device;
  f.factor = o.factor;
  f.duration_steps = o.steps;
  f.peer = o.peer;
  f.duration_s = o.seconds;
  actors::remote::control_client c{o.controller, o.timeout_s, o.allow_remote, std::nullopt};
  if (auto st = load_keys(o.keys, o.key_name, {"operator"}, c.keys); !st) return report(st.err());
  if (auto st = actors::remote::request_fault(c, f); !st) {
    auto e = st.err();
    if (e.code == "bad_field") e.code = "bad_fault";
    return report(e);
  }
  std::cout << o.kind << " device " << o.device << ": accepted\n";
  return exit_ok;
}

}  // namespace

void add_distributed(CLI::App& app, runner& run) {
  auto c = std::make_shared<controller_options>();
  c->train.run.out = "out/controller";
  auto* ctl = app.add_subcommand("controller", "Train a job whose devices are hosted by `dynapar node` processes");
  add_controller_flags(ctl, *c);
  ctl->add_option("--bind", c->bind, "ZeroMQ endpoint to listen on (default tcp://127.0.0.1:5555)");
  ctl->add_option("--address-file", c->address_file,
                  "Once listening, write the endpoint nodes dial here (a wildcard host becomes this machine's name; docs/CLUSTERS.md)");
  ctl->callback([c, &run] {
    run = [c] {
      // Refused before the job is loaded (a bad address should not cost a profiling run), and
      // before throwaway keys are written: beyond loopback needs keys of its own.
      if (auto st = comm::check_endpoint(c->bind, c->allow_remote, !c->keys.empty()); !st) return report(st.err());
      if (auto st = load_keys(*c); !st) return report(st.err());
      return train_main(c->train, [c](training::prepared_job& p, const training::train_callbacks& cb) { return train_remote(p, cb, *c); });
    };
  });

  auto l = std::make_shared<controller_options>();
  l->train.run.out = "out/launch";
  l->bind = "tcp://127.0.0.1:0";
  auto* launch = app.add_subcommand("launch", "Start a controller and N node processes on loopback and train the job");
  add_controller_flags(launch, *l);
  launch->add_option("--local", l->local_nodes, "Node processes to start; the job's devices go round-robin to them")
      ->required()
      ->check(CLI::Range(1, 64));
  launch->add_option("--bind", l->bind, "Endpoint for the nodes, so that more can join (default tcp://127.0.0.1:0, any free port)");
  launch->add_option("--devices", l->local_devices, "The job's devices the local nodes host (default all)")->delimiter(',');
  launch->add_option("--respawn-s", l->respawn_s, "Restart a node that crashed after this many seconds (default: never)")
      ->check(CLI::Range(0.0, 3600.0));
  launch->callback([l, &run] {
    run = [l] {
      // Checked before the throwaway keys are written, as for the controller.
      if (auto st = comm::check_endpoint(l->bind, l->allow_remote, !l->keys.empty()); !st) return report(st.err());
      if (auto st = load_keys(*l); !st) return report(st.err());
      return train_main(l->train, [l](training::prepared_job& p, const training::train_callbacks& cb) { return train_remote(p, cb, *l); });
    };
  });

  auto n = std::make_shared<node_options>();
  auto* node = app.add_subcommand("node", "Host devices for a controller (SIGTERM: leave after the current step)");
  node->add_option("--controller", n->node.controller, "The controller's endpoint, tcp://HOST:PORT")->required();
  node->add_option("--device", n->devices, "A device of the job this node hosts: ID or ID:NAME (repeatable; or --slurm)");
  node->add_option("--devices", n->described,
                   "auto or auto:K: host K devices (default 1; with --slurm, --devices-per-task) that the controller numbers from the "
                   "job's free ones, described by this host: its available memory shared among them (docs/CLUSTERS.md)");
  node->add_option("--memory-gb", n->memory_gb, "--devices auto: each device's memory in GB (default: measured)")->check(CLI::Range(1e-6, 1e6));
  node->add_flag("--slurm", n->slurm,
                 "Started by srun: host devices BASE + SLURM_PROCID x K .. + K-1, named slurm-JOB.STEP-PROCID, with DIR/device-ID.key "
                 "where --keys has one (docs/CLUSTERS.md)");
  node->add_option("--device-base", n->slurm_devices.base, "--slurm: this allocation's first device id (default 0)")
      ->check(CLI::Range(0, 1000000));
  node->add_option("--devices-per-task", n->slurm_devices.per_task, "--slurm: devices each task hosts (default 1)")
      ->check(CLI::Range(1, 1024));
  node->add_option("--name", n->node.name, "Unique node name (default node-PID)");
  node->add_option("--data-bind", n->node.data_bind,
                   "Where other nodes send this node's devices data, tcp://HOST:PORT (default tcp://127.0.0.1:0, any free port)");
  node->add_option("--place", n->node.place, "Where this node's devices compute: cpu or cuda:N (default cpu; docs/GPU.md)");
  node->add_flag("--leave", n->leave, "Ask the controller to retire these devices after the current step, then exit");
  node->add_flag("--allow-remote", n->node.allow_remote, "Allow a controller beyond loopback (needs --keys)");
  node->add_option("--keys", n->keys, "CURVE: DIR/node.key (with --leave: operator.key, else node.key) and the pinned DIR/controller.pub");
  node->add_option("--key-name", n->key_name, "Use DIR/NAME.key instead");
  node->add_option("--model-dir", n->node.model_dir,
                   "Load a TorchScript model only from this directory (the file of the controller's name; its hash is checked either way)");
  node->add_option("--data-dir", n->node.data_dir,
                   "Read the job's own data files (npy, tokens, images) only from this directory: the folder of the controller's name "
                   "in it (its fingerprint is checked either way); without it the controller sends each step's inputs");
  node->add_option("--shard-dir", n->node.shard_dir,
                   "Write and read checkpoint shards only in this directory (the controller's --checkpoint-dir, or its OUT/rollback, "
                   "where shared); without it the controller gathers the layers instead");
  node->add_option("--connect-timeout-s", n->node.connect_timeout_s, "Seconds to wait for the controller's answer (default 10)")
      ->check(CLI::Range(0.1, 3600.0));
  node->add_option("--controller-timeout-s", n->node.controller_timeout_s,
                   "Seconds of silence from the controller before the node gives up (default 10)")
      ->check(CLI::Range(0.5, 86400.0));
  node->callback([n, &run] { run = [n] { return node_main(*n); }; });

  auto f = std::make_shared<inject_options>();
  auto* inject = app.add_subcommand("inject", "Inject a fault into a running controller's cluster (docs/RELIABILITY.md)");
  inject->add_option("kind", f->kind, "kill, slow, pause, partition or leave (join: start a node instead)")
      ->required()
      ->check(CLI::IsMember({"kill", "slow", "pause", "leave", "join", "partition"}));
  inject->add_option("--controller", f->controller, "The controller's endpoint, tcp://HOST:PORT")->required();
  inject->add_option("--device", f->device, "The device it hits")->required()->check(CLI::Range(0, 1000000));
  inject->add_option("--factor", f->factor, "slow: speed multiplier in (0, 1]");
  inject->add_option("--steps", f->steps, "slow: how many steps")->check(CLI::Range(0, 100000000));
  inject->add_option("--seconds", f->seconds, "pause, partition: how long the device's node is silent")->check(CLI::Range(0.0, 3600.0));
  inject->add_option("--peer", f->peer, "partition: the other device (not supported: a partition cuts the node off from all)");
  inject->add_option("--timeout-s", f->timeout_s, "Seconds to wait for the controller's answer (default 10)")->check(CLI::Range(0.1, 3600.0));
  inject->add_flag("--allow-remote", f->allow_remote, "Allow a controller beyond loopback (needs --keys)");
  inject->add_option("--keys", f->keys, "CURVE: DIR/operator.key and the pinned DIR/controller.pub (docs/SECURITY.md)");
  inject->add_option("--key-name", f->key_name, "Use DIR/NAME.key instead");
  inject->callback([f, &run] { run = [f] { return inject_main(*f); }; });
}

}  // namespace dynapar::cli
