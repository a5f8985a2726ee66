#include "actors/remote/node_bridge.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "actors/device_actor.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors {

void node_shared::warn(const std::string& what) { logging::get("node")->warn("{}", what); }

namespace {

using clock = std::chrono::steady_clock;
using op = wire::device_op;

// Stands for a device on another node: what a device sends it goes out as a call.
caf::behavior peer_stub(caf::event_based_actor*, int target, std::shared_ptr<node_shared> sh) {
  auto tensor_call = [=](op kind, std::int64_t step, int micro, const model::tensor& t) {
    wire::device_call c;
    c.op = kind;
    c.device = target;
    c.ints = {step, micro};
    sh->post_data(c, {t});
  };
  return {
      [=](act_atom, std::int64_t step, int micro, const model::tensor& t) { tensor_call(op::activation, step, micro, t); },
      [=](grad_atom, std::int64_t step, int micro, const model::tensor& t) { tensor_call(op::gradient, step, micro, t); },
      [=](part_atom, const reduce_part& p) {
        std::vector<model::tensor> ts;
        auto c = remote::part_call(target, p, ts);
        sh->post_data(c, ts);
      },
      [=](hold_atom, const layer_transfer& x) {
        std::vector<model::tensor> ts;
        auto c = remote::layer_call(target, x.layer, x.from, x.to, x.bytes, x.replica, ts);
        sh->post_data(c, ts);
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
    else logging::get("node")->warn("dropped data for device {}, which is not on node {}", c.device, sh->name);
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
    case op::reduce: {
      auto t = remote::reduce_from(c);
      if (!t) return sh->fail(c, t.err().message);
      for (int id : t->holders) t->peers.push_back(resolve(self, id));
      self->request(dev, caf::infinite, reduce_atom::value, std::move(*t))
          .then(
              [sh, c](const sum_held& h) {
                wire::device_call r;
                r.ints = {h.step, h.layer, h.bytes_in};
                sh->answer(c, r);
              },
              on_error);
      return;
    }
    case op::reduce_part: {
      auto p = remote::part_from(c, ts);
      if (!p) return logging::get("node")->warn("dropped a sum's chunk: {}", p.err().message);
      self->send(dev, part_atom::value, std::move(*p));
      return;
    }
    case op::commit:
      if (!layer_arg(2) || c.reals.size() != 1) return;
      self->request(dev, caf::infinite, commit_atom::value, c.ints[0], static_cast<int>(c.ints[1]), c.reals[0]).then(ack, on_error);
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

}  // namespace

caf::actor spawn_node_bridge(caf::actor_system& sys, std::shared_ptr<node_shared> sh, std::map<int, caf::actor> devices) {
  return sys.spawn(node_bridge, std::move(sh), std::move(devices));
}

}  // namespace dynapar::actors
