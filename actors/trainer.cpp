#include "actors/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include "actors/controller_actor.hpp"
#include "actors/group_supervisor.hpp"
#include "actors/messages.hpp"
#include "data/sampler.hpp"

namespace dynapar::actors {
namespace {
using clock = std::chrono::steady_clock;

std::string text(const caf::error& e) { return to_string(e); }

}  // namespace

result<train_outcome> train(const model::model_chain& m, const data::dataset& d, const train_settings& s,
                            const std::function<void(const step_record&)>& on_step) {
  const int L = model::num_layers(m);
  if (d.size() < s.batch) return make_error("bad_job", "the data set has fewer samples than one batch");
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(std::max(1, s.scheduler_threads)));
  // Work stealing polls for work, and on few cores its spinning takes time from the device
  // threads (which are detached and do not use the scheduler); a shared queue sleeps instead.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  const auto timeout = std::chrono::milliseconds(static_cast<long>(s.step_timeout_s * 1000));

  // Groups, their devices, and where each layer lives, for the plan in force.
  std::vector<caf::actor> groups;
  std::map<int, std::vector<caf::actor>> holders;  // layer -> one device per group, plan order
  std::map<int, std::vector<int>> holder_ids;      // layer -> device ids holding it
  std::string failure;
  auto shutdown = [&] {
    for (auto& g : groups) self->send_exit(g, caf::exit_reason::user_shutdown);
    groups.clear();
  };
  // Spawns the plan's groups and gives every stage its layers (copies that carry optimizer state).
  auto deploy = [&](const planner::plan& p, const std::vector<model::layer_copy>& layers) -> status {
    holders.clear();
    holder_ids.clear();
    for (std::size_t g = 0; g < p.groups.size(); ++g) {
      const auto& gp = p.groups[g];
      group_config gc{static_cast<int>(g), gp.devices, gp.splits, p.schedule, s.optimizer, {}};
      for (int id : gp.devices) gc.speeds.push_back(s.speeds.count(id) ? s.speeds.at(id) : 1.0);
      groups.push_back(spawn_group(sys, gc));
      std::vector<caf::actor> devs;
      self->request(groups.back(), timeout, devices_atom::value)
          .receive([&](std::vector<caf::actor>& v) { devs = std::move(v); }, [&](caf::error& e) { failure = text(e); });
      if (!failure.empty()) return make_error("actor", "group " + std::to_string(g) + " did not start: " + failure);
      for (std::size_t j = 0; j < devs.size(); ++j)
        for (int l = gp.splits[j]; l < gp.splits[j + 1]; ++l) {
          self->send(devs[j], hold_atom::value, l, layers[l]);
          holders[l].push_back(devs[j]);
          holder_ids[l].push_back(gp.devices[j]);
        }
    }
    return ok_status();
  };
  std::vector<model::layer_copy> initial;
  for (int l = 0; l < L; ++l) initial.push_back(model::copy_layer(m, l));
  planner::plan current = s.plan;
  caf::actor controller;
  auto ask_controller = [&](std::int64_t slot) -> result<planner::plan> {
    std::optional<planner::plan> got;
    self->request(controller, timeout, plan_atom::value, slot)
        .receive([&](planner::plan& p) { got = std::move(p); }, [&](caf::error& e) { failure = text(e); });
    if (!got) return make_error("controller", "no plan for slot " + std::to_string(slot) + ": " + failure);
    if (auto v = planner::validate(*got, L, s.batch); !v) return v.err();
    return *got;
  };
  if (s.controller) {
    controller = spawn_controller(sys, *s.controller);
    auto first = ask_controller(0);
    if (!first) return first.err();
    current = *first;
  }
  if (auto v = planner::validate(current, L, s.batch); !v) return v.err();
  if (auto st = deploy(current, initial); !st) return st.err();
  std::size_t next_replan = 0;
  train_outcome out;
  for (const auto& [step, p] : s.replans)
    if (auto v = planner::validate(p, L, s.batch); !v) {
      shutdown();
      return make_error(v.err().code, "re-plan before step " + std::to_string(step) + ": " + v.err().message);
    }

  data::global_sampler sampler(d.size(), s.batch, s.seed);
  data::sample_ledger ledger(d.size());
  double total_time = 0;
  auto slices_of = [](const planner::plan& p) {
    std::vector<int> shares;
    for (const auto& gp : p.groups) shares.push_back(gp.share);
    return data::global_sampler::slices(shares);
  };
  auto slices = slices_of(current);

  for (std::int64_t t = 0; t < s.steps; ++t) {
    const auto t0 = clock::now();
    // A new plan takes effect between steps: every layer (all replicas are identical) moves
    // with its optimizer state from a current holder to the new plan's devices.
    std::optional<planner::plan> next;
    while (next_replan < s.replans.size() && s.replans[next_replan].first <= t) next = s.replans[next_replan++].second;
    if (controller && t > 0 && t % s.controller->replan_every == 0) {
      auto p = ask_controller(t / s.controller->replan_every);
      if (!p) {
        shutdown();
        return p.err();
      }
      bool same = p->groups.size() == current.groups.size();
      for (std::size_t g = 0; same && g < p->groups.size(); ++g) same = p->groups[g] == current.groups[g];
      if (!same) next = *p;
    }
    if (next) {
      std::vector<model::layer_copy> layers(L);
      for (int l = 0; l < L; ++l)
        self->request(holders[l].front(), timeout, copy_atom::value, l)
            .receive([&](model::layer_copy& c) { layers[l] = std::move(c); }, [&](caf::error& e) { failure = text(e); });
      const auto before = holder_ids;
      shutdown();
      if (!failure.empty()) return make_error("replan_failed", "before step " + std::to_string(t) + ": " + failure);
      if (auto st = deploy(*next, layers); !st) {
        shutdown();
        return st.err();
      }
      for (const auto& [l, ids] : holder_ids)
        for (int id : ids) {
          const auto& old = before.count(l) ? before.at(l) : std::vector<int>{};
          if (std::find(old.begin(), old.end(), id) == old.end()) ++out.layers_moved;
        }
      current = *next;
      slices = slices_of(current);
      ++out.replans;
    }
    const auto samples = sampler.step_samples(t);
    // Every group gets its contiguous slice, cut into micro-batches.
    for (std::size_t g = 0; g < groups.size(); ++g) {
      group_task task;
      task.step = t;
      task.report_to = caf::actor_cast<caf::actor>(self);
      const int u = current.groups[g].micro_batch;
      for (int lo = slices[g].first; lo < slices[g].second; lo += u) {
        const int hi = std::min(slices[g].second, lo + u);
        task.inputs.push_back(model::inputs(d, samples, lo, hi));
        task.targets.push_back(model::targets(d, samples, lo, hi));
      }
      self->send(groups[g], step_atom::value, std::move(task));
    }
    step_record rec;
    rec.step = t;
    double loss_sum = 0;
    for (std::size_t k = 0; k < groups.size() && failure.empty(); ++k) {
      self->receive(
          [&](const group_report& r) {
            if (!r.error.empty()) failure = r.error;
            loss_sum += r.loss_sum;
            rec.pipeline_s = std::max(rec.pipeline_s, r.time_s);
            for (const auto& st : r.stages) rec.stages.push_back({st.device, st.compute_s, st.wait_s, st.messages});
          },
          caf::after(timeout) >> [&] { failure = "step " + std::to_string(t) + " timed out"; });
    }
    if (!failure.empty()) {
      shutdown();
      return make_error("step_failed", failure);
    }
    // Each layer: its micro-batches' gradients from every holder, added in the global
    // micro-batch order (groups in plan order, micro-batches in order: the order of the
    // step's samples), divided by B and applied on every holder.
    std::map<int, std::vector<std::vector<model::tensor>>> parts;
    for (auto& [l, hs] : holders)
      for (auto& h : hs)
        self->request(h, timeout, grads_atom::value, l)
            .receive(
                [&, l = l](std::vector<std::vector<model::tensor>>& g) {
                  for (auto& micro : g) parts[l].push_back(std::move(micro));
                },
                [&](caf::error& e) { failure = text(e); });
    for (auto& [l, hs] : holders) {
      const auto summed = model::sum(parts[l]);
      for (auto& h : hs) self->send(h, apply_atom::value, l, summed, static_cast<double>(s.batch));
    }
    for (auto& [l, hs] : holders)
      for (std::size_t k = 0; k < hs.size(); ++k)
        self->receive([&](bool) {}, [&](caf::error& e) { failure = text(e); },
                      caf::after(timeout) >> [&] { failure = "applying gradients timed out"; });
    if (!failure.empty()) {
      shutdown();
      return make_error("step_failed", "step " + std::to_string(t) + ": " + failure);
    }
    ledger.applied(t / sampler.steps_per_epoch(), samples);
    if (t == s.perturb_step && holders.count(s.perturb_layer) &&
        s.perturb_group < static_cast<int>(holders[s.perturb_layer].size()))
      self->send(holders[s.perturb_layer][s.perturb_group], perturb_atom::value, s.perturb_layer);
    // Replicas of a layer must stay bit-identical (FORMULATION invariant 3).
    if (s.hash_every > 0 && (t + 1) % s.hash_every == 0) {
      for (auto& [l, hs] : holders) {
        std::vector<std::uint64_t> hashes;
        for (auto& h : hs)
          self->request(h, timeout, hash_atom::value, l)
              .receive([&](std::uint64_t v) { hashes.push_back(v); }, [&](caf::error& e) { failure = text(e); });
        for (auto v : hashes)
          if (v != hashes.front())
            failure = "replicas of layer " + std::to_string(l) + " (" + model::layer_name(m, l) + ") differ after step " +
                      std::to_string(t);
      }
      ++out.hash_checks;
      if (!failure.empty()) {
        shutdown();
        return make_error("replica_mismatch", failure);
      }
    }
    rec.time_s = std::chrono::duration<double>(clock::now() - t0).count();
    rec.loss = loss_sum / s.batch;
    total_time += rec.time_s;
    out.messages_per_step = 0;
    for (const auto& st : rec.stages) out.messages_per_step += st.messages;
    if (controller) {
      step_measure sm{t, rec.time_s, {}};
      for (const auto& st : rec.stages) sm.compute_s.emplace_back(st.device, st.compute_s);
      self->send(controller, report_atom::value, sm);
    }
    if (on_step) on_step(rec);
  }
  for (int l = 0; l < L; ++l)
    self->request(holders[l].front(), timeout, copy_atom::value, l)
        .receive([&](model::layer_copy& c) { out.final_layers.push_back(std::move(c)); },
                 [&](caf::error& e) { failure = text(e); });
  shutdown();
  if (controller) self->send_exit(controller, caf::exit_reason::user_shutdown);
  if (!failure.empty()) return make_error("step_failed", failure);
  out.final_plan = current;
  out.steps = s.steps;
  out.mean_step_time_s = s.steps > 0 ? total_time / s.steps : 0;
  out.samples_per_s = total_time > 0 ? s.steps * s.batch / total_time : 0;
  out.ledger = ledger.check(sampler, s.steps);
  return out;
}

}  // namespace dynapar::actors
