// The driver's answers to faults (docs/RELIABILITY.md): finding lost devices, recovering
// from them exactly once (rolling back to the cut: driver_layers.cpp), replica checks; and
// the probes of idle devices, whose speed no step measures.
#include <algorithm>
#include <set>

#include "actors/driver.hpp"
#include "control/recovery.hpp"
#include "logging/logging.hpp"
#include "model/collective.hpp"

namespace dynapar::actors::detail {

constexpr int max_late_retries = 4;  // deadlines of 2x, 4x, 8x, 16x before the run stops

// After a failed attempt: the devices that stopped (seen going down, or not answering a
// probe within 2 s; a hung one is stopped here).
std::set<int> driver::find_lost() {
  std::set<int> lost = members_.dead_ids();
  std::vector<int> ids;
  for (const auto& [id, a] : actors_.devices)
    if (!lost.count(id)) ids.push_back(id);
  const auto alive = probe_all(ids, std::chrono::seconds(2));
  for (int id : ids)
    if (!alive.count(id)) lost.insert(id);
  return lost;
}

// All probes go out at once, so that several hung devices cost one timeout, not one each.
std::map<int, double> driver::probe_all(const std::vector<int>& ids, std::chrono::milliseconds timeout) {
  using handle = decltype(self_->request(device_handle{}, timeout, probe_atom::value));
  std::vector<std::pair<int, handle>> probes;
  for (int id : ids) probes.emplace_back(id, self_->request(actors_.devices.at(id), timeout, probe_atom::value));
  std::map<int, double> out;
  for (auto& [id, h] : probes) h.receive([&, id = id](double s) { out[id] = s; }, [](caf::error&) {});
  return out;
}

// Holders under the plan in force, still in the run, that have not confirmed this attempt's
// apply phase.
std::set<int> driver::unconfirmed() const {
  if (!attempt_.last) return {};
  return attempt_.last->unconfirmed(holders_, [&](int id) { return actors_.devices.count(id) && !members_.wiped(id); });
}

// Messages of abandoned attempts still on their way to the driver.
void driver::drain_stale() {
  bool more = true;
  while (more)
    self_->receive([](const group_report&) {}, [](const device_gradients&) {}, [](bool) {}, [](const applied&) {},
                   [](caf::error&) {}, [](moved_atom, int, int, int, std::size_t) {},
                   [](moved_atom, int, int, int, const std::string&) {},
                   [&](caf::down_msg& d) { note_down(d, false); },  // the next attempt finds out
                   caf::after(std::chrono::milliseconds(0)) >> [&] { more = false; });
}

// Goes on without the lost devices (docs/RELIABILITY.md). The attempt in flight either
// reached its apply phase (committed: every surviving holder applied it, so the step is
// done) or not (nothing was applied anywhere: it re-runs on the same samples). Layers whose
// every holder is lost come back from the last consistent cut: the whole model rolls back to
// it and the steps since re-run. Either way each step and sample is applied exactly once.
result<driver::resumed> driver::recover(std::int64_t t, bool committed, const error& why, data::sample_ledger& ledger,
                                        data::global_sampler& sampler) {
  const auto started = clock::now();
  attempt_.early.reset();  // a step started early is abandoned with the one that failed
  ++comm_generation_;  // a holder's Gloo communicator may be broken now
  auto lost = find_lost();
  if (committed) {
    // The survivors' confirmations: each device answered its commit before the probe sent
    // after it, so they are here by now. A survivor that did not confirm (its apply failed)
    // may be a step behind: it counts as lost, and its layers come from replicas or the cut.
    for (bool more = true; more;)
      self_->receive([&](const applied& a) { attempt_.last->applied(a.device, a.tag, a.layer); },
                     caf::after(std::chrono::milliseconds(0)) >> [&] { more = false; });
    for (int id : unconfirmed())
      if (lost.insert(id).second) logging::get("train")->warn("step {}: device {} did not confirm applying the step", t, id);
  }
  const auto known = clock::now();
  const double probe_s = std::chrono::duration<double>(known - started).count();
  control::recovery_facts f;
  f.holders = holders_;
  f.wiped = members_.wiped_ids();
  f.lost = lost;
  // A Gloo communicator broken under a holder (a peer's process went away, or was cut off,
  // mid all-reduce) with every device answering is transient: the attempt re-runs on the next
  // generation's communicators, as a late one does.
  f.late = why.code == "deadline" || model::is_gloo_failure(why);
  f.committed = committed;
  f.controller = static_cast<bool>(actors_.controller);
  f.step = t;
  f.cut_step = recovery_.cut.step;
  f.late_retries = timing_.late_retries;
  f.max_late_retries = max_late_retries;
  const auto d = control::decide_recovery(f);
  using action = control::recovery_decision::action;
  if (d.what == action::give_up) return d.code.empty() ? why : make_error(d.code, d.why + " (" + why.message + ")");
  const resumed next{d.next_step, d.what != action::retry_late};
  for (int id : lost) {
    if (auto it = actors_.devices.find(id); it != actors_.devices.end()) {
      self_->demonitor(it->second.address());
      self_->send_exit(it->second, caf::exit_reason::kill);
      actors_.devices.erase(it);
    }
    self_->send(actors_.controller, leave_atom::value, id);
    note({t, "lost", "crash", id, "", why.message, probe_s});
    cluster_.forget(id);
    members_.forget(id);
    ++out_.devices_lost;
  }
  drain_stale();
  const char* how = committed ? "the step had applied" : "the step re-runs";
  if (d.step_applied) ledger.applied(t / sampler.steps_per_epoch(), sampler.step_samples(t));
  members_.set_wiped(d.wiped);
  if (d.what == action::retry_late) {
    ++timing_.late_retries;
    ++out_.step_retries;
    note({next.step, "retried", "", -1, "", why.message, since(started)});
    logging::get("train")->warn("{}: every device answers; {}", why.message, how);
    return next;
  }
  ++out_.recoveries;
  if (d.what == action::roll_back) {
    for (std::int64_t u : d.undone) ledger.undo(u / sampler.steps_per_epoch(), sampler.step_samples(u));
    std::vector<std::pair<int, int>> all;
    for (const auto& [l, ids] : holders_)
      for (int id : ids) all.emplace_back(id, l);
    drop_layers(all);  // answered before the cut's layers are placed, which need the memory
    recovery_.fresh = recovery_.cut;
    current_.reset();
    how = "rolled back to the last checkpoint";
  }
  // The recovery ends when the next attempt starts, after its re-plan and migration.
  recovery_.how = how;
  if (!recovery_.since) recovery_.since = known;
  logging::get("train")->warn("{}: {} lost ({}), going on at step {}", why.message, lost.size() == 1 ? "a device" : "devices", how,
                              next.step);
  return next;
}

clock::duration driver::step_deadline() const {
  double s = s_.step_deadline_s > 0 ? s_.step_deadline_s : std::max(5.0, 20 * timing_.mean_step_s);
  s *= static_cast<double>(1 << std::min(timing_.late_retries, 16));
  s = std::min(s, s_.step_timeout_s);
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// Faults of the job's plan due at step t and those `dynapar inject` asked for: each hits its
// device (or one the plan uses, drawn from the seed) at a random moment of about this step; a
// kill with a moment (sim::fault_moment) waits for it instead (fire_armed). Over node
// processes the device's node carries it out (actors/remote/node.cpp).
void driver::fire_faults(std::int64_t t) {
  const auto due = faults_.due(t, actors_.remote ? actors_.remote->injected() : std::vector<sim::fault>{});
  for (const auto& f : due.armed)
    logging::get("train")->info("step {}: a {} waits for the next {}", t, sim::name(f.kind), sim::name(f.moment));
  // A kill lands anywhere in the step; a hang within about its pipelines. Either is found at
  // the step's deadline, or at the calls' after it (between_steps).
  const auto window = [&](const sim::fault& f) { return f.kind == sim::fault_kind::kill ? timing_.last_step_s : timing_.last_pipeline_s; };
  for (const auto& f : due.now) strike(f, "plan", t, plan_devices(), window(f), "step");
  for (const auto& f : due.injected) strike(f, "inject", t, plan_devices(), window(f), "step");
  for (int id : cluster_.slow_downs_over(t)) {
    if (actors_.devices.count(id)) self_->send(actors_.devices.at(id), speed_atom::value, cluster_.true_speed(id));
    note({t, "ended", "slow", id, "", "back to its speed", 0});
  }
}

void driver::reprobe_idle() {
  if (!actors_.controller || !current_) return;
  std::set<int> busy;
  for (const auto& g : current_->groups) busy.insert(g.devices.begin(), g.devices.end());
  std::vector<int> idle;
  for (int id : members_.joined_ids())
    if (!busy.count(id) && !members_.failing(id) && actors_.devices.count(id)) idle.push_back(id);
  // One that fails or is late is skipped: the fault path, not this, finds devices that are gone.
  for (const auto& [id, probe_s] : probe_all(idle, timeout_))
    self_->send(actors_.controller, join_atom::value, id, announced_speed(id, probe_s), 0.0, -1);
}

// The devices the plan in force uses, ascending.
std::vector<int> driver::plan_devices() const {
  std::vector<int> used;
  if (current_)
    for (const auto& g : current_->groups) used.insert(used.end(), g.devices.begin(), g.devices.end());
  std::sort(used.begin(), used.end());
  return used;
}

// The armed kills waiting for moment `m`, now: each on its device or one of `among`, within
// `window_s` from now.
void driver::fire_armed(sim::fault_moment m, std::int64_t t, const std::vector<int>& among, double window_s) {
  // A pause lands at once (0 us): the device hangs before it answers the sum's or the
  // checkpoint's next message.
  for (const auto& f : faults_.take(m)) strike(f, "plan", t, among, f.kind == sim::fault_kind::pause ? 0 : window_s, sim::name(m));
}

void driver::strike_joining(int id, std::int64_t t) {
  if (faults_.take(sim::fault_moment::joining, 1).empty()) return;
  // Within about its three probes: it dies before, during or just after its benchmark.
  const int after_us = faults_.after_us(0.02);
  self_->send(actors_.devices.at(id), fail_atom::value, after_us);
  ++out_.faults_injected;
  const std::string detail = "killed " + std::to_string(after_us) + " us into its joining";
  logging::get("train")->warn("step {}: fault injected (plan): device {} {}", t, id, detail);
  note({t, "injected", sim::name(sim::fault_kind::kill), id, "plan", detail, 0});
}

// One fault carried out on its device, or on one of `among` drawn from the seed, at a random
// moment within `window_s` of the `when` that has just begun.
void driver::strike(const sim::fault& f, const char* source, std::int64_t t, std::vector<int> among, double window_s, const char* when) {
  auto log = logging::get("train");
  int id = f.device;
  if (id < 0) {
    among.erase(std::remove_if(among.begin(), among.end(), [&](int d) { return members_.failing(d); }), among.end());
    if (among.empty()) return log->warn("step {}: fault {} skipped: no device of the plan left to hit", t, sim::name(f.kind));
    id = among[faults_.pick(among.size())];
  }
  const char* kind = sim::name(f.kind);
  if (!members_.joined(id) || !actors_.devices.count(id) || members_.failing(id)) {
    log->warn("step {}: fault {} on device {} skipped: the device is not in the run", t, kind, id);
    return;
  }
  const auto& dev = actors_.devices.at(id);
  const int after_us = faults_.after_us(window_s);
  const std::string into = std::to_string(after_us) + " us into the " + when;
  std::string detail;
  switch (f.kind) {
    case sim::fault_kind::kill:
      self_->send(dev, fail_atom::value, after_us);
      members_.kill_sent(id);
      detail = "killed " + into;
      break;
    case sim::fault_kind::pause:
    case sim::fault_kind::partition:
      self_->send(dev, pause_atom::value, after_us, f.seconds, f.kind == sim::fault_kind::partition);
      detail = std::string(f.kind == sim::fault_kind::pause ? "hung" : "cut off") + " for " + std::to_string(f.seconds).substr(0, 5) +
               " s, " + into;
      break;
    case sim::fault_kind::corrupt: {
      int layer = -1;
      for (const auto& [l, ids] : holders_)
        if (layer < 0 && std::count(ids.begin(), ids.end(), id)) layer = l;
      if (layer >= 0) self_->send(dev, perturb_atom::value, layer);
      detail = "layer " + std::to_string(layer) + " nudged (silent corruption)";
      break;
    }
    case sim::fault_kind::slow:
      cluster_.slow_down(id, f.factor, t + f.steps);
      self_->send(dev, speed_atom::value, cluster_.true_speed(id));
      detail = "speed x" + std::to_string(f.factor).substr(0, 5) + " for " + std::to_string(f.steps) + " steps";
      break;
  }
  ++out_.faults_injected;
  log->warn("step {}: fault injected ({}): device {} {}", t, source, id, detail);
  note({t, "injected", kind, id, source, detail, f.seconds});
}

// Replicas of a layer must stay bit-identical (docs/RUNTIME.md, "Why a run equals one
// device") among devices on the same place: a CPU's and a GPU's optimizer round differently, so across places
// replicas agree only to rounding (docs/GPU.md; --verify measures how far).
status driver::check_replicas(std::int64_t t, std::vector<std::vector<training::train_outcome::replica_hash>>* all) {
  using handle = decltype(self_->request(device_handle{}, timeout_, hash_atom::value, 0));
  const auto started = clock::now();
  const char* what = "the replica check";
  const auto wait = between_steps();
  std::vector<std::tuple<int, int, handle>> asked;  // layer, holder, answer: all at once
  for (const auto& [l, ids] : holders_)
    for (int id : ids) asked.emplace_back(l, id, self_->request(actors_.devices.at(id), wait, hash_atom::value, l));
  std::map<std::pair<int, std::string>, std::uint64_t> first;  // (layer, place) -> the first replica's hash there
  std::string differ;
  for (auto& [l, id, h] : asked)
    h.receive(
        [&, l = l, id = id](std::uint64_t v) {
          if (all) {
            if (all->size() <= static_cast<std::size_t>(l)) all->resize(static_cast<std::size_t>(l) + 1);
            (*all)[static_cast<std::size_t>(l)].push_back({id, place_of(id), v});
          }
          const auto [it, fresh] = first.emplace(std::make_pair(l, place_of(id)), v);
          if (!fresh && it->second != v && differ.empty())
            differ = "replicas of layer " + std::to_string(l) + " (" + model::layer_name(m_, l) + ") differ after step " +
                     std::to_string(t);
        },
        [&](caf::error& e) { answer_failed(e, started, what); });
  ++out_.hash_checks;
  if (!failure_.empty()) return check("after step " + std::to_string(t));  // a device to recover from, first
  if (differ.empty()) return ok_status();
  return make_error("replica_mismatch", differ);
}

// Calls between steps wait as long as a step may (its deadline): a device hung there is then
// found by the probes as in a step, not after the step_timeout_s that migrations get.
std::chrono::milliseconds driver::between_steps() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(step_deadline());
}

// An answer that did not come: past the deadline it is a late device (recover() probes who),
// else the error as it came.
void driver::answer_failed(const caf::error& e, clock::time_point started, const char* what) {
  if (!failure_.empty()) return;
  if (e == caf::sec::request_timeout) return missed(started, what);
  failure_ = text(e);
}

}  // namespace dynapar::actors::detail
