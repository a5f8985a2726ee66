#include "training/shard_names.hpp"
#include "actors/remote/node_bridge.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "actors/device_actor.hpp"
#include "common/overloaded.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors::remote {

void node_shared::warn(const std::string& what) { logging::get("node")->warn("{}", what); }

namespace {

using clock = std::chrono::steady_clock;

// Stands for a device on another node: what a device sends it goes out as a call.
device_peer::behavior_type peer_stub(device_peer::pointer, int target, std::shared_ptr<node_shared> sh) {
  auto data = [=](wire::device_op op, const std::vector<model::tensor>& ts) { sh->post_data(remote::call_to(target, std::move(op)), ts); };
  return {
      [=](act_atom, std::int64_t tag, int micro, int from, const model::tensor& t) { data(wire::ops::activation{tag, micro, from}, {t}); },
      [=](grad_atom, std::int64_t tag, int micro, int from, const model::tensor& t) { data(wire::ops::gradient{tag, micro, from}, {t}); },
      [=](part_atom, const reduce_part& p) {
        std::vector<model::tensor> ts;
        auto op = remote::part_of(p, ts);
        data(std::move(op), ts);
      },
      [=](hold_atom, const layer_transfer& x) {
        std::vector<model::tensor> ts;
        auto op = remote::layer_of(x.layer, x.from, x.to, x.bytes, x.replica, ts);
        data(std::move(op), ts);
      },
  };
}

// Stands for the controller process: stage reports and arrivals go back to it.
using upstream_handle = stage_sink::extend_with<migration_sink>;

upstream_handle::behavior_type upstream_stub(upstream_handle::pointer, std::shared_ptr<node_shared> sh) {
  return {
      [=](const stage_report& r) { sh->post(remote::call_to(r.device, remote::report_of(r))); },
      [=](moved_atom, int layer, int from, int to, std::size_t bytes) {
        sh->post(remote::call_to(from, wire::ops::moved{layer, from, to, bytes, {}}));
      },
      [=](moved_atom, int layer, int from, int to, const std::string& refused) {  // the target is out of memory
        sh->post(remote::call_to(from, wire::ops::moved{layer, from, to, 0, remote::clip(refused)}));
      },
  };
}

struct bridge_state {
  std::shared_ptr<node_shared> sh;
  std::map<int, device_handle> devices;
  std::map<int, device_peer> peers;
  upstream_handle upstream;
  static inline const char* name = "node_bridge";
};
using bridge = node_bridge_handle::stateful_base<bridge_state>;

device_peer resolve(bridge* self, int id) {
  auto& s = self->state;
  if (auto it = s.devices.find(id); it != s.devices.end()) return it->second;  // same node: in-process hand-off
  auto& p = s.peers[id];
  if (!p) p = self->spawn(peer_stub, id, s.sh);
  return p;
}

// Fault injection: this process dies with SIGKILL, its devices with it, unannounced.
void kill_node(const node_shared& sh, const wire::ops::fail& f) {
  const auto after = std::chrono::microseconds(f.after_us);  // at most an hour (runtime/wire checked)
  logging::get("node")->warn("fault injection: node {} is killed in {} us", sh.name, after.count());
  std::thread([after] {
    std::this_thread::sleep_for(after);
    ::raise(SIGKILL);
  }).detach();
}

// Fault injection: the node goes silent, hung or cut off, for a while.
void silence_node(const std::shared_ptr<node_shared>& sh, const wire::ops::pause& p) {
  const auto after = std::chrono::microseconds(p.after_us);
  const bool cut = p.cut_off;
  const double seconds = p.seconds;
  logging::get("node")->warn("fault injection: node {} goes silent ({}) for {:.1f} s in {} us", sh->name, cut ? "cut off" : "hung",
                             seconds, after.count());
  auto go_silent = [sh, cut, seconds] {
    sh->cut_off = cut;
    const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
    sh->silent_until_us = std::chrono::duration_cast<std::chrono::microseconds>(until.time_since_epoch()).count();
  };
  if (after.count() == 0) return go_silent();  // now, before the next call (a pause at a sum or checkpoint)
  std::thread([after, go_silent] {
    std::this_thread::sleep_for(after);
    go_silent();
  }).detach();
}

// A call from the controller, or data from another node, for one of this node's devices.
// runtime/wire has checked it on decode.
void on_call(bridge* self, const wire::device_call& c, std::vector<model::tensor>& ts) {
  auto& s = self->state;
  auto sh = s.sh;
  auto it = s.devices.find(c.device);
  if (it == s.devices.end()) {
    if (c.id != 0) sh->fail(c, "device " + std::to_string(c.device) + " is not on node " + sh->name);
    else logging::get("node")->warn("dropped data for device {}, which is not on node {}", c.device, sh->name);
    return;
  }
  const device_handle dev = it->second;
  auto on_error = [sh, c](caf::error& e) { sh->fail(c, to_string(e)); };
  auto ack = [sh, c](bool) { sh->answer(c, wire::ops::ack{}); };
  auto applied_ack = [sh, c](const applied&) { sh->answer(c, wire::ops::ack{}); };
  // A layer copy sent back; one without its optimizer state (`lean`) comes with the whole
  // state's hash, which its device took before dropping the state.
  auto copy_answer = [sh, c](int layer, bool lean) {
    return [sh, c, layer, lean](model::layer_copy& l) {
      std::vector<model::tensor> out;
      auto r = remote::layer_of(layer, c.device, -1, 0, l, out);
      if (lean) r.state_hash = model::state_hashes({l}).front();
      sh->answer(c, std::move(r), out);
    };
  };
  namespace ops = wire::ops;
  std::visit(
      overloaded{
          [&](const ops::hold& h) {
            if (!h.shard.empty()) {  // the device reads its checkpoint shard, found in this node's --shard-dir
              auto path = training::shard_path(sh->shard_dir, h.shard);
              if (!path) return sh->fail(c, path.err().message);
              return self->request(dev, caf::infinite, hold_atom::value, h.layer, training::shard_file{*path, h.shard_sha256})
                  .then(ack, on_error);
            }
            auto lm = remote::layer_from(sh->layers, h, ts);
            if (!lm) return c.id != 0 ? sh->fail(c, lm.err().message) : logging::get("node")->warn("{}", lm.err().message);
            if (lm->from < 0) {
              self->request(dev, caf::infinite, hold_atom::value, lm->layer, lm->replica).then(ack, on_error);
            } else {
              self->send(dev, hold_atom::value, layer_transfer{lm->layer, lm->from, lm->to, lm->replica, lm->bytes, s.upstream});
            }
          },
          [&](const ops::migrate& m) {
            self->request(dev, caf::infinite, migrate_atom::value, m.layer, m.to, resolve(self, m.to), remote::link_from(m.path),
                          migration_sink{s.upstream})
                .then(ack, on_error);
          },
          [&](const ops::expect& x) { self->request(dev, caf::infinite, expect_atom::value, x.layer, x.from).then(ack, on_error); },
          [&](const ops::drop& d) {
            // id 0: a caller that waits for nothing.
            self->request(dev, caf::infinite, drop_atom::value, d.layer)
                .then([sh, c](bool) { if (c.id != 0) sh->answer(c, wire::ops::ack{}); },
                      [sh, c](caf::error& e) { if (c.id != 0) sh->fail(c, to_string(e)); });
          },
          [&](const ops::perturb& p) { self->send(dev, perturb_atom::value, p.layer); },
          [&](const ops::speed& v) { self->send(dev, speed_atom::value, v.factor); },
          [&](const ops::memory& m) { self->send(dev, memory_atom::value, m.bytes); },
          [&](const ops::timing& t) {
            std::vector<double> per_layer;
            for (const auto& l : t.layers) per_layer.insert(per_layer.end(), {l.forward_s, l.backward_s, l.fixed_s, l.update_s});
            self->send(dev, timing_atom::value, std::move(per_layer));
          },
          [&](const ops::probe&) {
            self->request(dev, caf::infinite, probe_atom::value).then([sh, c](double v) { sh->answer(c, ops::probed{v}); }, on_error);
          },
          [&](const ops::step& st) {
            auto task = remote::task_from(st, ts, st.evaluate ? sh->val.get() : sh->data.get());
            if (!task) {
              stage_report r;
              r.device = c.device;
              r.tag = st.tag;
              r.error = task.err().message;
              return sh->post(remote::call_to(c.device, remote::report_of(r)));
            }
            if (task->prev_id >= 0) task->prev = resolve(self, task->prev_id);
            if (task->next_id >= 0) task->next = resolve(self, task->next_id);
            task->report_to = s.upstream;
            self->send(dev, step_atom::value, std::move(*task));
          },
          [&](const ops::activation& a) { self->send(dev, act_atom::value, a.tag, a.micro, a.from, ts.at(0)); },
          [&](const ops::gradient& g) { self->send(dev, grad_atom::value, g.tag, g.micro, g.from, ts.at(0)); },
          [&](const ops::gradients& g) {
            self->request(dev, caf::infinite, grads_atom::value, g.tag, g.layers)
                .then(
                    [sh, c](device_gradients& got) {
                      std::vector<model::tensor> out;
                      auto r = remote::gradients_of(got, out);
                      sh->answer(c, std::move(r), out);
                    },
                    on_error);
          },
          [&](const ops::apply& a) {
            self->request(dev, caf::infinite, apply_atom::value, a.tag, a.layer, ts, a.divisor, a.scale).then(applied_ack, on_error);
          },
          [&](const ops::reduce& r) {
            auto t = remote::reduce_from(r);
            for (int id : t.holders) t.peers.push_back(resolve(self, id));
            self->request(dev, caf::infinite, reduce_atom::value, std::move(t))
                .then([sh, c](const sum_held& h) { sh->answer(c, ops::sum_held{h.tag, h.layer, h.bytes_in, h.norms}); }, on_error);
          },
          [&](const ops::reduce_part& p) {
            auto part = remote::part_from(p, ts);
            if (!part) return logging::get("node")->warn("dropped a sum's chunk: {}", part.err().message);
            self->send(dev, part_atom::value, std::move(*part));
          },
          [&](const ops::commit& m) {
            self->request(dev, caf::infinite, commit_atom::value, m.tag, m.layer, m.divisor, m.scale).then(applied_ack, on_error);
          },
          [&](const ops::hash& h) {
            self->request(dev, caf::infinite, hash_atom::value, h.layer)
                .then([sh, c](std::uint64_t v) { sh->answer(c, ops::hashed{v}); }, on_error);
          },
          [&](const ops::copy& k) { self->request(dev, caf::infinite, copy_atom::value, k.layer).then(copy_answer(k.layer, false), on_error); },
          [&](const ops::copy_lean& k) {
            self->request(dev, caf::infinite, copy_lean_atom::value, k.layer).then(copy_answer(k.layer, true), on_error);
          },
          [&](const ops::save_shard& k) {
            auto path = training::shard_path(sh->shard_dir, k.path);
            if (!path) return sh->answer(c, ops::shard_saved{{}, 0, path.err().message});
            self->request(dev, caf::infinite, save_atom::value, k.layer, *path)
                .then([sh, c](const ops::shard_saved& x) { sh->answer(c, x); }, on_error);
          },
          [&](const ops::fail& f) { kill_node(*sh, f); },
          [&](const ops::pause& p) { silence_node(sh, p); },
          [&](const ops::retire&) {
            self->send_exit(dev, caf::exit_reason::user_shutdown);
            s.devices.erase(c.device);
            --sh->live;
          },
          [&](const auto&) {
            if (c.id != 0) sh->fail(c, "a node does not take this call");
          },
      },
      c.op);
}

node_bridge_handle::behavior_type node_bridge(bridge* self, std::shared_ptr<node_shared> sh, std::map<int, device_handle> devices) {
  self->state.sh = sh;
  self->state.devices = std::move(devices);
  self->state.upstream = self->spawn(upstream_stub, sh);
  return {
      [=](remote_atom, const wire::device_call& c, std::vector<model::tensor>& ts) { on_call(self, c, ts); },
  };
}

}  // namespace

node_bridge_handle spawn_node_bridge(caf::actor_system& sys, std::shared_ptr<node_shared> sh, std::map<int, device_handle> devices) {
  return sys.spawn(node_bridge, std::move(sh), std::move(devices));
}

}  // namespace dynapar::actors::remote
