// The driver's membership and plan changes between steps: devices entering and leaving with
// the emulated dynamics (or their nodes), waiting for devices, asking the controller for
// the next plan, and applying a plan diff (migration, groups re-formed). Idle devices'
// probes are in driver_faults.cpp.
#include "actors/driver.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <thread>
#include <tuple>

#include "actors/controller_actor.hpp"
#include "actors/device_actor.hpp"
#include "actors/device_clock.hpp"
#include "actors/group_supervisor.hpp"
#include "actors/messages.hpp"
#include "actors/session.hpp"
#include "logging/logging.hpp"
#include "planner/migration.hpp"

namespace dynapar::actors {
namespace detail {

status driver::enter_slot(std::int64_t slot, bool& changed) {
  cluster_.enter_slot(static_cast<int>(slot));
  emulated_sums_.stale = true;
  // Injected crashes: the device dies at a random moment of about the next step, unannounced;
  // detection and recovery find out (docs/RELIABILITY.md).
  for (int id : cluster_.failing(static_cast<int>(slot)))
    if (members_.joined(id) && actors_.devices.count(id)) {
      self_->send(actors_.devices.at(id), fail_atom::value, faults_.after_us(timing_.last_step_s));
      members_.kill_sent(id);
      ++out_.faults_injected;
      note({slot * s_.slot_steps, "injected", "kill", id, "plan", "the dynamics' fail event at slot " + std::to_string(slot), 0});
    }
  if (auto st = update_membership(slot, changed); !st) return st;
  reprobe_idle();
  return ok_status();
}

status driver::update_membership(std::int64_t slot, bool& changed) {
  for (const auto& dev : cluster_.truth().devices) {
    const int id = dev.id;
    if (members_.failing(id)) continue;
    const bool in = members_.joined(id);
    // Devices in node processes take part while their node hosts them.
    const bool available = dev.available && (!actors_.remote || actors_.remote->present(id));
    if (available && !in) {
      // A device joins: its actor starts (unless the caller brought one, or a node hosts it),
      // runs the benchmark at its speed, and announces the measured speed.
      auto& a = actors_.devices[id];
      if (!a) a = actors_.remote ? actors_.remote->proxy(id) : spawn_device(sys_, local_device(id));
      if (!a) return make_error("device_lost", "device " + std::to_string(id) + " left its node while joining");
      self_->monitor(a);
      strike_joining(id, slot * s_.slot_steps);
      self_->send(a, speed_atom::value, cluster_.true_speed(id));
      // A node that described the device says its memory (else the job does) and its host:
      // devices described on one host share a node in the plans, numbered after the job's.
      const auto described = actors_.remote ? actors_.remote->described_memory(id) : std::nullopt;
      const double memory = described.value_or(dev.memory_bytes);
      int node = -1;
      if (const auto host = described ? actors_.remote->described_host(id) : std::nullopt)
        for (const auto& d : cluster_.truth().devices) node = std::max({node, d.node + 1 + *host, *host});
      self_->send(a, memory_atom::value, memory);
      if (s_.profile_timed) self_->send(a, timing_atom::value, device_timing(*s_.profile));  // run() checked it is there
      // The fastest of three probes, like this machine's reference: on a shared machine one
      // probe can land on a load spike, and a device announced too slow may never be planned
      // (and so never measured) again.
      double probe_s = std::numeric_limits<double>::infinity();
      for (int k = 0; k < 3 && failure_.empty(); ++k)
        self_->request(a, timeout_, probe_atom::value)
            .receive([&](double v) { probe_s = std::min(probe_s, v); }, [&](caf::error& e) { failure_ = text(e); });
      if (!failure_.empty()) {  // lost while joining (its node went silent): it did not join
        logging::get("train")->warn("device {} did not join: {}", id, failure_);
        failure_.clear();
        self_->demonitor(a.address());
        // Its proxy goes too: one left behind would hold the device as hosted (launch never
        // restarts its node) and keep the run from ending (cli.place_join hung so).
        self_->send_exit(a, caf::exit_reason::kill);
        actors_.devices.erase(id);
        continue;
      }
      if (actors_.controller) self_->send(actors_.controller, join_atom::value, id, announced_speed(id, probe_s), memory, node);
      members_.join(id);
      if (slot > first_slot_) ++out_.joins;
      changed = true;
    } else if (!available && in) {
      depart(id);
      changed = true;
    } else if (in) {
      self_->send(actors_.devices[id], speed_atom::value, cluster_.true_speed(id));
    }
  }
  return ok_status();
}

// Waits up to rejoin_wait_s for more devices than the `have` joined now: replacements for
// lost ones (`why`: what the run cannot do with those it has).
status driver::await_devices(std::int64_t slot, std::int64_t t, bool& changed, const std::string& why) {
  const auto have = members_.joined_count();
  logging::get("train")->warn("step {}: {}; waiting up to {:.0f} s for devices to join", t, why, s_.rejoin_wait_s);
  const auto until = clock::now() + std::chrono::duration<double>(s_.rejoin_wait_s);
  while (members_.joined_count() <= have && clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (actors_.remote) remote_departures();
    if (auto st = update_membership(slot, changed); !st) return st;
    if (const auto none = cb_.no_replacements ? cb_.no_replacements() : ""; !none.empty() && members_.joined_count() <= have)
      return make_error("no_devices", why + " at step " + std::to_string(t) + ", and " + none);
  }
  if (members_.joined_count() > have) return ok_status();
  const auto waited = std::to_string(s_.rejoin_wait_s).substr(0, 4);
  if (have == 0) return make_error("no_devices", "every device was lost and none joined within " + waited + " s (step " + std::to_string(t) + ")");
  return make_error("no_devices", why + ", and no device joined within " + waited + " s");
}

namespace {
control::decision fixed(const planner::plan& p, const char* why) {
  control::decision d;
  d.plan = p;
  d.reason = why;
  return d;
}
}  // namespace

result<std::optional<control::decision>> driver::next_plan(std::int64_t t, bool replan) {
  if (!actors_.controller) {
    std::optional<control::decision> next;
    // The plan in force at t: the job's, or the last scheduled re-plan up to t (a resumed run
    // starts late).
    if (!current_) {
      next = fixed(s_.plan, "the job's plan");
      for (const auto& [step, p] : s_.replans)
        if (step <= t && step > 0) next = fixed(p, "scheduled re-plan");
    }
    for (const auto& [step, p] : s_.replans)
      if (replan && step == t && t > 0 && current_) next = fixed(p, "scheduled re-plan");
    return next;
  }
  if (!replan) return std::optional<control::decision>{};
  std::optional<control::decision> got;
  self_->request(actors_.controller, timeout_, plan_atom::value, t / replan_every_)
      .receive([&](control::decision& d) { got = std::move(d); }, [&](caf::error& e) { failure_ = text(e); });
  if (!got) {
    auto e = make_error("controller", "no plan before step " + std::to_string(t) + ": " + failure_);
    failure_.clear();
    return e;
  }
  out_.plans_kept = got->kept_plans;
  out_.plans_reverted = got->reverted_plans;
  predicted_s_ = got->predicted_s;
  queue_ = got->queue;
  // The same plan is no change, unless devices it uses were lost and must be refilled.
  if (current_ && got->plan.groups == current_->groups && members_.wiped_ids().empty()) return std::optional<control::decision>{};
  return got;
}

// The plan diff, applied between steps: each layer a device newly holds comes from the
// best-connected old holder over the emulated link (with its optimizer state); layers no
// longer held are dropped; groups re-form around the devices.
status driver::apply(const control::decision& decision, std::int64_t t, std::int64_t slot, training::step_record& rec) {
  const auto& next = decision.plan;
  const auto live = members_.joined_ids();
  if (auto v = planner::validate(next, L_, s_.batch, live); !v)
    return make_error(v.err().code, "plan before step " + std::to_string(t) + ": " + v.err().message +
                                        " (devices that joined and have not left: the plan may use only these)");
  const auto started = clock::now();
  const auto diff = planner::diff(
      current_ ? &*current_ : nullptr, next, [&](int from, int to) { return comm::transfer_s(link(from, to), 1e6); },
      members_.wiped_ids());
  std::vector<int> ends;  // the devices layers move between: where a kill "during a migration" lands
  for (const auto& mv : diff.moves)
    if (mv.from >= 0) ends.insert(ends.end(), {mv.from, mv.to});
  if (!ends.empty()) {
    std::sort(ends.begin(), ends.end());
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
    fire_armed(sim::fault_moment::migration, t, ends, 0.005);
  }
  // The diff in the order planner::migration_order gives: what a device gives away goes
  // before what it takes; a cycle stages one layer (stage_layer), placed once the rest moved.
  planner::migration_order order(diff);
  std::vector<std::pair<planner::layer_move, staged_layer>> staged;
  std::string stage_dir;
  double bytes = 0;
  using kind = planner::migration_step::kind;
  for (planner::migration_step st; failure_.empty() && order.next(st);) {
    if (st.what == kind::drop) failure_ = drop_layers(st.drops);
    if (st.what == kind::drop_last) drop_layers(st.drops);  // a device that does not answer is found lost by the step
    if (st.what == kind::move) bytes += move_layers(st.moves, t);
    if (st.what == kind::place_staged) place_staged(staged);
    if (st.what == kind::stage) {
      double size = 0;
      const auto c = stage_layer(st.from, st.layer, t, size, stage_dir);
      for (const auto& mv : st.moves) {
        staged.emplace_back(mv, c);
        bytes += size;
      }
    }
  }
  if (failure_.empty()) failure_ = order.error();
  if (auto st = check("migrating layers before step " + std::to_string(t)); !st) {
    // A device that dropped layers no longer matches the plan in force: it counts as holding
    // nothing (recovery takes its layers from other holders or the cut).
    std::set<int> droppers;
    for (const auto& d : order.dropped()) droppers.insert(d.first);
    std::vector<std::pair<int, int>> all;
    for (const auto& [l, ids] : holders_)
      for (int id : ids)
        if (droppers.count(id)) all.emplace_back(id, l);
    drop_layers(all);
    for (int id : droppers) members_.wipe(id);
    return st;
  }
  for (auto& g : groups_) self_->send_exit(g, caf::exit_reason::user_shutdown);
  groups_.clear();
  holders_.clear();
  ++comm_generation_;
  for (std::size_t g = 0; g < next.groups.size(); ++g) {
    const auto& gp = next.groups[g];
    group_config gc{static_cast<int>(g), gp.devices, {}, gp.splits, next.schedule};
    for (int id : gp.devices) gc.actors.push_back(actors_.devices.at(id));
    groups_.push_back(spawn_group(sys_, gc));
    for (std::size_t j = 0; j < gp.devices.size(); ++j)
      for (int l = gp.splits[j]; l < gp.splits[j + 1]; ++l) holders_[l].push_back(gp.devices[j]);
  }
  training::plan_record pr{t, slot, next, decision.reason, decision.predicted_s, decision.queue, 0, bytes, since(started),
                 diff.joined, diff.left};
  if (current_) {
    pr.layers_moved = static_cast<int>(diff.moves.size());
    out_.layers_moved += pr.layers_moved;
    out_.bytes_migrated += bytes;
    ++out_.replans;
    rec.migration_s = pr.migration_s;
    rec.bytes_migrated = bytes;
  }
  current_ = next;
  members_.plan_applied();
  emulated_sums_.stale = true;
  if (cb_.on_plan) cb_.on_plan(pr);
  return ok_status();
}

std::string driver::drop_layers(const std::vector<std::pair<int, int>>& drops) {
  using handle = decltype(self_->request(device_handle{}, timeout_, drop_atom::value, 0));
  std::vector<handle> asked;  // all go out at once: one round trip, not one per layer
  for (const auto& [dev, layer] : drops)
    if (auto it = actors_.devices.find(dev); it != actors_.devices.end())
      asked.push_back(self_->request(it->second, timeout_, drop_atom::value, layer));
  std::string failed;
  for (auto& h : asked)
    h.receive([](bool) {}, [&](caf::error& e) {
      if (failed.empty()) failed = text(e);
    });
  return failed;
}

// Leavers out of the run once the plan in force no longer uses them, and a recovery's end
// noted (its re-plan and migration included).
status driver::retire(std::int64_t t, std::int64_t slot) {
  if (!current_) return make_error("bad_job", "no plan before step " + std::to_string(t));
  for (int id : members_.leaving_ids())
    for (const auto& g : current_->groups)
      if (std::count(g.devices.begin(), g.devices.end(), id))
        return make_error("device_left", "device " + std::to_string(id) + " left at slot " + std::to_string(slot) +
                                             " but the plan in force still uses it (re-planning needs a controller)");
  for (int id : members_.leaving_ids()) {
    // A device its node still hosts left only in the emulated dynamics: its proxy stays, so
    // that it can come back. Otherwise its actor (or its node's device) is retired.
    if (!actors_.remote || !actors_.remote->present(id)) {
      self_->send_exit(actors_.devices.at(id), caf::exit_reason::user_shutdown);
      actors_.devices.erase(id);
    }
    members_.retire(id);
  }
  if (recovery_.since) {
    recovery_.seconds.push_back(since(*recovery_.since));
    recovery_.since.reset();
    note({t, "recovered", "", -1, "", recovery_.how + "; re-planned and migrated", recovery_.seconds.back()});
    logging::get("train")->warn("step {}: recovered in {:.3f} s ({}; re-plan and migration included)", t, recovery_.seconds.back(),
                                recovery_.how);
  }
  return ok_status();
}

}  // namespace detail
}  // namespace dynapar::actors
