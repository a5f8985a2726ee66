// The driver's answers to faults (docs/RELIABILITY.md): finding lost devices, recovering
// from them exactly once, consistent cuts (checkpoints), replica checks.
#include <algorithm>

#include "actors/driver.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors::detail {

// After a failed attempt: the devices that stopped (seen going down, or not answering a
// probe within 2 s; a hung one is stopped here).
std::set<int> driver::find_lost() {
  std::set<int> lost = dead_;
  for (const auto& [id, a] : actors_.devices) {
    if (lost.count(id)) continue;
    bool alive = false;
    self_->request(a, std::chrono::seconds(2), probe_atom::value).receive([&](double) { alive = true; }, [&](caf::error&) {});
    if (!alive) lost.insert(id);
  }
  return lost;
}

// Messages of abandoned attempts still on their way to the driver.
void driver::drain_stale() {
  bool more = true;
  while (more)
    self_->receive([](const group_report&) {}, [](const device_gradients&) {}, [](bool) {}, [](caf::error&) {},
                   [&](caf::down_msg& d) { note_down(d, false); },  // the next attempt finds out
                   caf::after(std::chrono::milliseconds(0)) >> [&] { more = false; });
}

// Goes on without the lost devices (docs/RELIABILITY.md). The attempt in flight either
// reached its apply phase (committed: every surviving holder applied it, so the step is
// done) or not (nothing was applied anywhere: it re-runs on the same samples). Layers whose
// every holder is lost come back from the last consistent cut: the whole model rolls back to
// it and the steps since re-run. Either way each step and sample is applied exactly once.
status driver::recover(std::int64_t& t, bool committed, const error& why, data::sample_ledger& ledger,
                       data::global_sampler& sampler) {
  const auto started = clock::now();
  auto lost = find_lost();
  if (lost.empty()) return why;
  if (!actors_.controller) {
    std::string ids;
    for (int id : lost) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    return make_error("device_lost", "device " + ids + " lost (" + why.message +
                                         "); going on without it needs a controller (replan_every)");
  }
  bool rollback = false;
  for (const auto& [l, ids] : holders_) {
    bool kept = false;
    for (int id : ids) kept = kept || !lost.count(id);
    rollback = rollback || !kept;
  }
  for (int id : lost) {
    if (auto it = actors_.devices.find(id); it != actors_.devices.end()) {
      self_->demonitor(it->second);
      self_->send_exit(it->second, caf::exit_reason::kill);
      actors_.devices.erase(it);
    }
    self_->send(actors_.controller, leave_atom::value, id);
    joined_.erase(id);
    leaving_.erase(id);
    failing_.erase(id);
    dead_.erase(id);
    ++out_.devices_lost;
  }
  drain_stale();
  ++out_.recoveries;
  force_replan_ = true;
  const char* how = committed ? "the step had applied" : "the step re-runs";
  if (committed) ledger.applied(t / sampler.steps_per_epoch(), sampler.step_samples(t));
  const std::int64_t done = committed ? t + 1 : t;
  if (rollback) {
    // Steps [cut, done) are undone with the model they trained.
    for (std::int64_t u = cut_.step; u < done; ++u) ledger.undo(u / sampler.steps_per_epoch(), sampler.step_samples(u));
    for (const auto& [l, ids] : holders_)
      for (int id : ids)
        if (actors_.devices.count(id)) self_->send(actors_.devices.at(id), drop_atom::value, l);
    fresh_ = cut_.layers;
    current_.reset();
    t = cut_.step;
    how = "rolled back to the last checkpoint";
  } else {
    t = done;
  }
  recovery_s_.push_back(since(started));
  logging::get("train")->warn("{}: recovered in {:.3f} s ({}), going on at step {}", why.message, recovery_s_.back(), how, t);
  return ok_status();
}

// Between steps every replica of a layer is the same (invariant 3), so one copy per layer and
// the controller's state make a consistent cut; the caller writes it out.
status driver::take_checkpoint(std::int64_t steps_done) {
  checkpoint c;
  c.step = steps_done;
  for (int l = 0; l < L_; ++l)
    self_->request(actors_.devices.at(holders_.at(l).front()), timeout_, copy_atom::value, l)
        .receive([&](model::layer_copy& x) { c.layers.push_back(std::move(x)); }, [&](caf::error& e) { failure_ = text(e); });
  if (actors_.controller)
    self_->request(actors_.controller, timeout_, snapshot_atom::value)
        .receive([&](controller_snapshot& x) { c.controller = std::move(x); }, [&](caf::error& e) { failure_ = text(e); });
  if (auto st = check("checkpoint after step " + std::to_string(steps_done - 1)); !st) return st;
  cut_ = c;
  if (!cb_.on_checkpoint) return ok_status();
  ++out_.checkpoints;
  cb_.on_checkpoint(std::move(c));
  return ok_status();
}

// Replicas of a layer must stay bit-identical (FORMULATION invariant 3).
status driver::check_replicas(std::int64_t t) {
  for (const auto& [l, ids] : holders_) {
    std::vector<std::uint64_t> hashes;
    for (int id : ids)
      self_->request(actors_.devices.at(id), timeout_, hash_atom::value, l)
          .receive([&](std::uint64_t v) { hashes.push_back(v); }, [&](caf::error& e) { failure_ = text(e); });
    for (auto v : hashes)
      if (v != hashes.front() && failure_.empty())
        failure_ = "replicas of layer " + std::to_string(l) + " (" + model::layer_name(m_, l) + ") differ after step " + std::to_string(t);
  }
  ++out_.hash_checks;
  if (failure_.empty()) return ok_status();
  auto e = make_error("replica_mismatch", failure_);
  failure_.clear();
  return e;
}

}  // namespace dynapar::actors::detail
