// A device actor: its stage program (schedule/runner), the layers it holds and their
// migration; the holders' sum is in device_sum.cpp.
#include "actors/device_actor.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "actors/device_state.hpp"
#include "comm/keys.hpp"

namespace dynapar::actors {

namespace {
using namespace device_detail;

void finish_report(device_state& s) {
  auto add = [&](comm::link_shaper& l, int to) {
    if (l.transfers() > 0) s.report.links.push_back({s.cfg.id, to, l.bytes(), l.busy_s(), l.transfers()});
    l.reset_counters();
  };
  add(s.to_next, s.task.next_id);
  add(s.to_prev, s.task.prev_id);
}

void advance(device_self self);

// The rest of the open step (stage_task::resume): its gradients, loss and report go on.
void resume(device_self self, stage_task task) {
  auto& s = self->state;
  s.task.program = std::move(task.program);
  s.task.inputs = std::move(task.inputs);
  s.task.targets = std::move(task.targets);
  s.task.samples = std::move(task.samples);
  s.task.first_micro = task.first_micro;
  s.task.more = false;
  s.runner = schedule::stage_runner(s.task.program);
  s.worker->continue_step(s.task.first_micro);
  s.active = true;
  s.wait_since = clock::now();
  advance(self);
}

// A probe ended and its step waits for the rest (stage_task::resume).
bool open(const device_state& s) { return !s.active && s.task.more; }

// A probe's progress so far (stage_report::interim).
stage_report interim_report(const device_state& s, int kind) {
  stage_report r;
  r.device = s.cfg.id;
  r.tag = s.task.tag;
  r.compute_s = s.report.compute_s;
  r.interim = kind;
  return r;
}

// Runs instructions until the program waits or ends; reports the stage when it ends.
void advance(device_self self) {
  auto& s = self->state;
  if (!s.active) return;
  s.report.wait_s += since(s.wait_since);
  auto fail = [&](const std::string& why) {
    s.report.error = "device " + std::to_string(s.cfg.id) + ": " + why;
    s.active = false;
    s.task.more = false;  // a failed probe's step is over
    self->send(s.task.report_to, s.report);
  };
  while (const schedule::instruction* in = s.runner.next()) {
    const int m = in->micro;
    switch (in->kind) {
      case schedule::op::load:
        if (m >= static_cast<int>(s.task.inputs.size())) return fail("no input for micro-batch " + std::to_string(m));
        s.current = s.task.inputs[m];
        break;
      case schedule::op::recv_act:
        s.current = s.acts[{s.task.tag, m}];
        s.acts.erase({s.task.tag, m});
        break;
      case schedule::op::forward: {
        const device_clock::work_start w;
        auto out = s.task.evaluate ? s.worker->infer(s.task.lo, s.task.hi, s.current) : s.worker->forward(m, s.task.lo, s.task.hi, s.current);
        s.report.compute_s += s.speed.finish(w, s.speed.reference_s(s.task.lo, s.task.hi, true, static_cast<double>(model::samples(s.current))));
        if (!out) return fail(out.err().message);
        if (s.task.evaluate && !s.task.next) {  // the last stage scores the micro-batch
          if (m >= static_cast<int>(s.task.targets.size())) return fail("no targets for micro-batch " + std::to_string(m));
          auto sc = model::score(*out, s.task.targets[m]);
          if (!sc) return fail(sc.err().message);
          s.report.loss_sum += *sc;
          break;
        }
        s.outputs[m] = *out;
        if (s.task.more && !s.told_forward) {  // dispatch learns this step's pace from it
          s.told_forward = true;
          self->send(s.task.report_to, interim_report(s, 1));
        }
        break;
      }
      case schedule::op::send_act:
        send_shaped(self, s.to_next, s.task.to_next, s.task.next, static_cast<double>(model::bytes(s.outputs[m])),
                    act_atom::value, s.task.tag, m, s.cfg.id, s.outputs[m]);
        s.outputs.erase(m);
        ++s.report.messages;
        break;
      case schedule::op::recv_grad:
        break;  // consumed by backward
      case schedule::op::backward: {
        const device_clock::work_start w;
        const bool last = !s.task.next;
        if (last && m >= static_cast<int>(s.task.targets.size())) return fail("no targets for micro-batch " + std::to_string(m));
        const auto& from = last ? s.task.targets[m] : s.grads[{s.task.tag, m}];  // a row per sample
        auto g = last ? s.worker->backward_from_loss(m, from) : s.worker->backward(m, from);
        s.report.compute_s += s.speed.finish(w, s.speed.reference_s(s.task.lo, s.task.hi, false, static_cast<double>(model::samples(from))));
        if (!g) return fail(g.err().message);
        s.grads.erase({s.task.tag, m});
        s.input_grads[m] = *g;
        break;
      }
      case schedule::op::send_grad:
        send_shaped(self, s.to_prev, s.task.to_prev, s.task.prev, static_cast<double>(model::bytes(s.input_grads[m])),
                    grad_atom::value, s.task.tag, m, s.cfg.id, s.input_grads[m]);
        s.input_grads.erase(m);
        ++s.report.messages;
        break;
    }
    s.runner.done();
  }
  if (s.runner.finished() && s.task.more) {  // a probe: the step stays open for its rest
    s.active = false;  // open: the step waits for its rest
    self->send(s.task.report_to, interim_report(s, 2));
    if (s.rest) {  // decided while the probe ran: no wait
      auto rest = std::move(*s.rest);
      s.rest.reset();
      resume(self, std::move(rest));
    }
  } else if (s.runner.finished()) {
    s.active = false;
    if (!s.task.evaluate) s.report.loss_sum = s.worker->loss_sum();
    finish_report(s);
    self->send(s.task.report_to, s.report);
    start_deferred(self);
  } else {
    s.wait_since = clock::now();
  }
}

// Holds a layer unless it does not fit the emulated memory; the error says what would not fit.
std::string hold(device_state& s, int layer, const model::layer_copy& replica) {
  const std::size_t b = model::resident_bytes(replica, s.cfg.optimizer);
  std::size_t used = 0;
  for (const auto& [l, n] : s.held_bytes) used += l == layer ? 0 : n;
  if (s.cfg.memory_bytes > 0 && static_cast<double>(used + b) > s.cfg.memory_bytes) {
    auto mb = [](double v) {
      char out[32];
      std::snprintf(out, sizeof out, "%.2f", v / 1e6);
      return std::string(out);
    };
    return "device " + std::to_string(s.cfg.id) + " out of memory: layer " + std::to_string(layer) + " needs " +
           mb(static_cast<double>(b)) + " MB with its optimizer state, " + mb(static_cast<double>(used)) +
           " MB are held, the device has " + mb(s.cfg.memory_bytes) + " MB";
  }
  s.worker->hold(layer, replica);
  s.held_bytes[layer] = b;
  return {};
}

// A layer from its checkpoint shard, the file checked against its SHA-256 first (a shard torn
// or changed since the checkpoint was written is refused, not trained on).
result<model::layer_copy> read_shard(const device_config& cfg, int layer, const training::shard_file& f) {
  if (!cfg.layers) return make_error("bad_checkpoint", "device " + std::to_string(cfg.id) + " cannot read shards (no model)");
  auto sha = comm::file_sha256(f.path);
  if (!sha) return make_error("bad_checkpoint", "layer " + std::to_string(layer) + "'s shard: " + sha.err().message);
  if (*sha != f.sha256) return make_error("bad_checkpoint", "'" + f.path + "' does not match its SHA-256 (torn or changed)");
  auto w = model::read_shard(f.path, layer);
  if (!w) return w.err();
  return cfg.layers->from_wire(layer, *w);
}

wire::ops::shard_saved save_shard(device_state& s, int layer, const std::string& path) {
  if (!s.worker->holds(layer)) return {{}, 0, "device " + std::to_string(s.cfg.id) + " does not hold layer " + std::to_string(layer)};
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);  // a node's own disk
  if (auto st = model::save_shard(path, layer, s.worker->copy(layer)); !st) return {{}, 0, st.err().message};
  auto sha = comm::file_sha256(path);
  if (!sha) return {{}, 0, sha.err().message};
  return {*sha, static_cast<std::uint64_t>(std::filesystem::file_size(path, ec)), {}};
}

device_impl::behavior_type device_actor(device_self self, device_config cfg) {
  self->state.cfg = std::move(cfg);
  self->state.sum = model::device_sums(self->state.cfg.id);
  self->state.speed.set_speed(self->state.cfg.speed);
  self->state.worker = model::make_worker(self->state.cfg.optimizer, self->state.cfg.place);
  return {
      [=](hold_atom, int layer, const model::layer_copy& replica) -> caf::result<bool> {
        if (auto oom = hold(self->state, layer, replica); !oom.empty()) return caf::make_error(caf::sec::runtime_error, oom);
        return true;
      },
      [=](hold_atom, int layer, const training::shard_file& f) -> caf::result<bool> {
        auto replica = read_shard(self->state.cfg, layer, f);
        if (!replica) return caf::make_error(caf::sec::runtime_error, replica.err().message);
        if (auto oom = hold(self->state, layer, *replica); !oom.empty()) return caf::make_error(caf::sec::runtime_error, oom);
        return true;
      },
      // A plan moved `layer` from here to `to`: send a copy over the emulated link.
      [=](migrate_atom, int layer, int to, const device_peer& target, const comm::link_spec& link,
          const migration_sink& report_to) -> caf::result<bool> {
        auto& s = self->state;
        if (!s.worker->holds(layer))
          return caf::make_error(caf::sec::runtime_error,
                                 "device " + std::to_string(s.cfg.id) + " cannot send layer " + std::to_string(layer) + ": not held");
        layer_transfer x{layer, s.cfg.id, to, s.worker->copy(layer), 0, report_to};
        x.bytes = model::bytes(x.replica);
        send_shaped(self, s.migration[to], link, target, static_cast<double>(x.bytes), hold_atom::value, std::move(x));
        return true;
      },
      [=](expect_atom, int layer, int from) {
        self->state.expected_layers.emplace(layer, from);
        return true;
      },
      [=](hold_atom, const layer_transfer& x) {
        if (!expected_layer(self->state, x)) return;
        if (auto oom = hold(self->state, x.layer, x.replica); !oom.empty()) return self->send(x.report_to, moved_atom::value, x.layer, x.from, x.to, oom);
        self->send(x.report_to, moved_atom::value, x.layer, x.from, x.to, x.bytes);
      },
      [=](drop_atom, int layer) {
        self->state.worker->drop(layer);
        self->state.held_bytes.erase(layer);
        return true;
      },
      [=](memory_atom, double bytes) { self->state.cfg.memory_bytes = std::max(0.0, bytes); },
      [=](speed_atom, double speed) { self->state.speed.set_speed(speed); },
      [=](timing_atom, const std::vector<double>& per_layer) { self->state.speed.set_timing(per_layer); },
      // The joining device's benchmark, at its speed.
      [=](probe_atom) {
        self->state.speed.new_step();
        const device_clock::work_start w;
        model::benchmark_work(self->state.cfg.place);
        return self->state.speed.finish(w);
      },
      [=](step_atom, stage_task& task) {
        auto& s = self->state;
        if (task.resume) {  // the rest of the open step: its gradients, loss and report go on
          if (s.active && s.task.more && task.tag == s.task.tag) {  // the probe still runs
            s.rest = std::move(task);
            return;
          }
          if (!open(s) || task.tag != s.task.tag) {
            if (task.tag < s.task.tag) return;  // an abandoned attempt's
            stage_report r;
            r.device = s.cfg.id;
            r.tag = task.tag;
            r.error = "device " + std::to_string(s.cfg.id) + ": the rest of step " + std::to_string(task.tag) + " without its probe";
            self->send(task.report_to, r);
            return;
          }
          return resume(self, std::move(task));
        }
        s.task = std::move(task);
        s.runner = schedule::stage_runner(s.task.program);
        // Messages of this step that came before its task are kept in acts/grads; those of
        // earlier tags (an abandoned attempt) are dropped.
        const auto stale = [&](auto& m) {
          for (auto it = m.begin(); it != m.end();) it = it->first.first < s.task.tag ? m.erase(it) : std::next(it);
        };
        stale(s.acts);
        stale(s.grads);
        drop_unnamed_data(s);
        // An abandoned attempt's sums that were waiting: dropped unanswered, as above.
        s.deferred.erase(std::remove_if(s.deferred.begin(), s.deferred.end(), [&](const auto& d) { return d.first.tag < s.task.tag; }),
                         s.deferred.end());
        s.outputs.clear();
        s.input_grads.clear();
        for (const auto& [k, t] : s.acts)
          if (k.first == s.task.tag) s.runner.arrived_activation(k.second);
        for (const auto& [k, t] : s.grads)
          if (k.first == s.task.tag) s.runner.arrived_gradient(k.second);
        s.report = stage_report{};
        s.speed.new_step();
        s.report.device = s.cfg.id;
        s.report.tag = s.task.tag;
        if (!s.task.evaluate) {  // an evaluation leaves the training state as it is
          if (s.updated_step >= 0 && s.updated_step == s.task.train_step - 1)
            s.report.idle_s = std::chrono::duration<double>(clock::now() - s.updated_at).count();
          s.worker->begin_step(s.task.train_step, s.task.first_micro, s.task.accumulate);
        }
        s.active = true;
        s.told_forward = false;
        s.rest.reset();
        s.wait_since = clock::now();
        advance(self);
      },
      [=](act_atom, std::int64_t tag, int micro, int from, const model::tensor& t) {
        auto& s = self->state;
        if (tag < s.task.tag || !take_data(s, tag, micro, from, true)) return;  // an abandoned attempt's, or refused
        s.acts[{tag, micro}] = t;
        if (tag != s.task.tag || !s.active) return;  // the next attempt's, early
        s.runner.arrived_activation(micro);
        advance(self);
      },
      [=](grad_atom, std::int64_t tag, int micro, int from, const model::tensor& t) {
        auto& s = self->state;
        if (tag < s.task.tag || !take_data(s, tag, micro, from, false)) return;
        s.grads[{tag, micro}] = t;
        if (tag != s.task.tag || !s.active) return;
        s.runner.arrived_gradient(micro);
        advance(self);
      },
      // Fault injection: the device dies `after_us` from now, wherever it is in its work.
      [=](fail_atom, int after_us) { self->delayed_send(self, std::chrono::microseconds(after_us), fail_atom::value); },
      [=](fail_atom) { self->quit(caf::exit_reason::kill); },
      // Fault injection: hung (or, in one process, cut off: the same from outside) for a
      // while. Blocking is the point: nothing is handled or sent meanwhile. The device runs
      // on its own thread, so nobody else is held up.
      [=](pause_atom, int after_us, double seconds, bool /* cut off */) {
        if (after_us <= 0) return std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // hung now
        self->delayed_send(self, std::chrono::microseconds(after_us), pause_atom::value, seconds);
      },
      [=](pause_atom, double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); },
      [=](grads_atom, std::int64_t tag, const std::vector<int>& layers) {
        device_gradients out{self->state.cfg.id, tag, {}};
        for (int l : layers) out.layers.emplace_back(l, self->state.worker->partial_gradients(l));
        return out;
      },
      [=](apply_atom, std::int64_t tag, int layer, const std::vector<model::tensor>& summed, double divisor, double scale) {
        return apply_sum(self->state, tag, layer, summed, divisor, scale);
      },
      [=](reduce_atom, reduce_task& t) -> caf::result<sum_held> {
        auto& s = self->state;
        auto done = self->make_response_promise<sum_held>();
        // The stage of this step failed: no partial sums will come; the answer says why.
        if (t.tag == s.task.tag && !s.active && !s.report.error.empty())
          return done.deliver(caf::make_error(caf::sec::runtime_error, s.report.error + " (so its sums of the tag never started)")), done;
        // Sent with the step, it waits for this device's stage of that step to end.
        if (t.tag > s.task.tag || (t.tag == s.task.tag && (s.active || open(s)))) s.deferred.emplace_back(std::move(t), done);
        else start_reduce(self, std::move(t), done);
        return done;
      },
      [=](part_atom, reduce_part& p) { sum_take(self, std::move(p)); },
      [=](gloo_atom, std::int64_t tag, int layer, const std::vector<model::tensor>& sum, const std::string& error) {
        gloo_done(self, tag, layer, sum, error);
      },
      [=](commit_atom, std::int64_t tag, int layer, double divisor, double scale) {
        return commit_sum(self->state, tag, layer, divisor, scale);
      },
      [=](hash_atom, int layer) { return static_cast<std::uint64_t>(self->state.worker->hash(layer)); },
      [=](copy_atom, int layer) { return self->state.worker->copy(layer); },
      [=](copy_lean_atom, int layer) {
        auto c = self->state.worker->copy(layer);
        model::drop_optimizer_state(c);
        return c;
      },
      [=](save_atom, int layer, const std::string& path) { return save_shard(self->state, layer, path); },
      [=](perturb_atom, int layer) { self->state.worker->perturb(layer); },
  };
}
}  // namespace

device_handle spawn_device(caf::actor_system& sys, const device_config& cfg) {
  return sys.spawn<caf::detached>(device_actor, cfg);
}

}  // namespace dynapar::actors
