#include "control/controller.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "planner/evaluate.hpp"
#include "planner/hysteresis.hpp"

namespace dynapar::control {

controller_config paced(controller_config c, const pacing& p) {
  const int steps = std::max(1, p.slot_steps);
  c.planner.plan_steps = std::max(1, static_cast<int>(std::lround(p.plan_lifetime_slots * steps)));
  if (p.joins)
    for (auto& d : c.cluster.devices) {
      d.speed = 1;  // unknown until the device joins with its benchmark
      d.available = false;
    }
  return c;
}

controller::controller(controller_config cfg, std::shared_ptr<planner::policy> policy)
    : cfg_(std::move(cfg)),
      policy_(std::move(policy)),
      queues_(cfg_.budget),
      estimates_(cfg_.cluster, cfg_.profile, cfg_.smoothing) {}

void controller::set_available(int id, bool on) {
  for (auto& d : cfg_.cluster.devices)
    if (d.id == id && d.available != on) {
      d.available = on;
      events_.push_back("device " + std::to_string(id) + (on ? " joined" : " leaves"));
    }
}

void controller::join(int id, double measured_speed, double memory_bytes, int node) {
  set_available(id, true);
  estimates_.announce(id, measured_speed);
  for (auto& d : cfg_.cluster.devices) {
    if (d.id != id) continue;
    if (memory_bytes > 0 && d.memory_bytes != memory_bytes) {
      d.memory_bytes = memory_bytes;
      char mb[32];
      std::snprintf(mb, sizeof mb, "%.3g MB", memory_bytes / 1e6);
      events_.push_back("device " + std::to_string(id) + " now has " + mb + " of memory");
    }
    if (node >= 0 && d.node != node) {
      d.node = node;
      events_.push_back("device " + std::to_string(id) + " is on node " + std::to_string(node));
    }
  }
}

void controller::leave(int id) { set_available(id, false); }

void controller::announce(const planner::cluster_state& c) {
  for (const auto& d : c.devices) set_available(d.id, d.available);
  cfg_.cluster = c;
}

void controller::observe(const measurement& m) {
  if (!current_) return;
  const planner::problem announced(cfg_.profile, cfg_.cluster, cfg_.planner, cfg_.budget);
  estimates_.observe(m, announced);
  slot_cost_ += m.cost;
  for (const auto& [id, j] : m.energy_j) slot_energy_[id] += j;
  ++slot_steps_;
  if (!first_step_ && m.time_s > 0) {
    slot_.time_s.push_back(m.time_s);
    slot_.cost.push_back(m.cost);
    double joules = 0;
    for (const auto& [id, j] : m.energy_j) joules += j;
    slot_.energy_j.push_back(joules);
  }
  first_step_ = false;
}

// One queue update a slot, with the slot's mean cost a step: the budget bounds the average
// step, and the queue moves at the pace of the decisions it steers. Energy likewise: each
// device's mean joules a step against its budget.
void controller::close_slot() {
  if (slot_steps_ == 0) return;
  estimates_.end_slot();
  std::vector<std::pair<int, double>> energy;
  for (const auto& [id, j] : slot_energy_) energy.emplace_back(id, j / slot_steps_);
  queues_.update(slot_cost_ / slot_steps_, energy);
  slot_cost_ = 0;
  slot_energy_.clear();
  slot_steps_ = 0;
}

namespace {
double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The step-to-step noise of a slot's steady steps: the median relative change from one step
// to the next (x 1.05, the normal deviation's from it). One lasting jump in the slot, a
// device that slowed for good, moves the median little.
double step_noise(const std::vector<double>& t) {
  if (t.size() < 3) return 0;
  std::vector<double> d;
  for (std::size_t k = 1; k < t.size(); ++k) d.push_back(std::abs(t[k] - t[k - 1]) / t[k - 1]);
  return 1.05 * median(std::move(d));
}
}  // namespace

// What a slot's steady steps teach about the predictions (docs/MODEL.md), both from the
// last `bias_window` slots' measured mean against the prediction each was decided on:
// - the bias, for the cost allowance: their median, so that one surprising slot (a device
//   that slowed before the estimates knew) does not shrink every later allowance;
// - the noise, which the hysteresis must not chase: the steps' own plus the slots' spread
//   about the bias, again robust to one outlying slot.
void controller::update_bias(const std::vector<double>& times) {
  if (!current_ || times.empty() || !(decided_pred_ > 0)) return;
  double mean = 0;
  for (double t : times) mean += t / static_cast<double>(times.size());
  const bool first = recent_bias_.empty();
  recent_bias_.push_back(std::log(mean / decided_pred_));
  if (recent_bias_.size() > bias_window) recent_bias_.pop_front();
  log_bias_ = median({recent_bias_.begin(), recent_bias_.end()});
  // The slots' spread about the bias (median absolute deviation x 1.48, the normal
  // deviation's): speeds that wander between slots, which a plan chasing them cannot keep
  // up with; one outlying slot does not count.
  std::vector<double> dev;
  for (double l : recent_bias_) dev.push_back(std::abs(std::exp(l - log_bias_) - 1));
  step_noise_ = first ? step_noise(times) : 0.7 * step_noise_ + 0.3 * step_noise(times);
  noise_ = step_noise_ + 1.48 * median(std::move(dev));
}

regret_verdict judge_regret(const regret_side& before, const regret_side& after, double floor, double noise) {
  regret_verdict v;
  const auto &before_s = before.time_s, &after_s = after.time_s;
  if (before_s.size() < 2 || after_s.size() < 2) return v;
  auto mean = [](const std::vector<double>& x) {
    double m = 0;
    if (x.empty()) return m;
    for (double e : x) m += e / static_cast<double>(x.size());
    return m;
  };
  auto var = [&](const std::vector<double>& x) {  // the sample variance
    const double m = mean(x);
    double s = 0;
    for (double e : x) s += (e - m) * (e - m);
    return s / static_cast<double>(x.size() - 1);
  };
  v.before_s = mean(before_s);
  v.after_s = mean(after_s);
  if (!(v.before_s > 0)) return v;
  const double least = noise * v.before_s * noise * v.before_s;
  const double se = std::sqrt(std::max(var(before_s), least) / static_cast<double>(before_s.size()) +
                              std::max(var(after_s), least) / static_cast<double>(after_s.size()));
  v.margin = std::max(floor, 2 * se / v.before_s);
  auto less = [&](const std::vector<double>& b, const std::vector<double>& a) {
    const double mb = mean(b), ma = mean(a);
    return mb > 0 && !a.empty() && 1 - ma / mb > v.margin;
  };
  const bool cheaper = less(before.cost, after.cost) || less(before.energy_j, after.energy_j);
  v.undo = v.after_s / v.before_s - 1 > v.margin && !cheaper;
  return v;
}

// The change on trial gets its verdict once it has run 2 steady steps (over one or more
// slots), if no device came or went meanwhile (then it is not judged: the world changed).
// The plan before is judged as it would run now: its measured steps scaled by how its
// prediction moved with the estimates since the change (a device of it that slowed meanwhile
// slows it too; the change is not to blame for that).
std::optional<planner::plan> controller::judge_trial(const planner::problem& p, const planner::queue_state& q, const regret_side& slot,
                                                     std::string& why) {
  if (!trial_) return std::nullopt;
  if (!events_.empty()) {
    trial_.reset();
    return std::nullopt;
  }
  auto& s = trial_->steps;
  s.time_s.insert(s.time_s.end(), slot.time_s.begin(), slot.time_s.end());
  s.cost.insert(s.cost.end(), slot.cost.begin(), slot.cost.end());
  s.energy_j.insert(s.energy_j.end(), slot.energy_j.begin(), slot.energy_j.end());
  if (s.time_s.size() < 2) return std::nullopt;
  trial t = std::move(*trial_);
  trial_.reset();
  const auto now = planner::evaluate(p, t.before, &t.before, q);
  const double drift = now && t.before_pred > 0 && now->batch_time_s > 0 ? now->batch_time_s / t.before_pred : 1;
  for (double& x : t.before_steps.time_s) x *= drift;
  const auto v = judge_regret(t.before_steps, t.steps, cfg_.planner.replan_margin, step_noise_);
  if (!v.undo) return std::nullopt;
  for (const auto& g : t.before.groups)  // the plan before must still be possible
    for (int id : g.devices)
      for (const auto& d : cfg_.cluster.devices)
        if (d.id == id && !d.available) return std::nullopt;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "undid the last change: it measured %.2f ms a step against %.2f ms under the plan before (x%.3f for the estimates "
                "since; margin %.1f %%)",
                v.after_s * 1e3, v.before_s * 1e3, drift, 100 * v.margin);
  why = buf;
  return t.before;
}

planner::queue_state controller::planning_state() const {
  auto q = queues_.state();
  if (!recent_bias_.empty()) q.time_ratio = std::exp(log_bias_);
  return q;
}

result<decision> controller::decide(std::int64_t slot, const std::vector<int>& hidden) {
  if (!policy_) return make_error("bad_policy", "the controller has no policy");
  close_slot();
  const regret_side steady = std::move(slot_);  // the slot's steady steps
  slot_ = {};
  update_bias(steady.time_s);
  const planner::queue_state q = planning_state();
  const planner::cluster_state view = estimates_.view(cfg_.cluster, hidden);
  const planner::problem p(cfg_.profile, view, cfg_.planner, cfg_.budget);
  const planner::plan* previous = current_ ? &*current_ : nullptr;
  auto next = policy_->decide({p, previous, q, slot});
  if (!next) return next.err();
  decision d;
  auto same_layout = [](const planner::plan& a, const planner::plan& b) {
    if (a.groups.size() != b.groups.size()) return false;
    for (std::size_t g = 0; g < a.groups.size(); ++g)
      if (a.groups[g].devices != b.groups[g].devices || a.groups[g].splits != b.groups[g].splits) return false;
    return true;
  };
  // The layout undone is refused for a while, unless the world changed: devices came or went,
  // or an estimate moved by 15 %.
  auto speeds = [&] {
    std::vector<double> v;
    for (const auto& dev : view.devices) v.push_back(dev.available ? dev.speed : 0.0);
    return v;
  };
  if (refused_) {
    bool moved = !events_.empty() || slot >= refused_->until;
    const auto now = speeds();
    for (std::size_t i = 0; i < now.size() && i < refused_->speeds.size(); ++i)
      moved = moved || std::abs(now[i] - refused_->speeds[i]) > 0.15 * refused_->speeds[i];
    if (moved) refused_.reset();
  }
  const auto back = cfg_.regret ? judge_trial(p, q, steady, d.reverted_why) : std::nullopt;
  if (back) {
    ++reverted_;
    refused_ = refused{*current_, slot + cfg_.regret_hold_slots, speeds()};
    *next = *back;
  } else if (refused_ && current_ && same_layout(*next, refused_->plan) && !(next->groups == current_->groups)) {
    ++kept_;
    d.kept_why = "kept the plan: the proposed layout measured slower and was undone (until slot " + std::to_string(refused_->until) + ")";
    *next = *current_;
  } else if (const auto why = doubted_drop(view, *next); !why.empty()) {
    // The layout in force with shares re-solved to the estimates: the device keeps at least
    // a quantum, the others take the rest.
    ++kept_;
    d.kept_why = why + " (proposed " + planner::describe(*next) + ")";
    *next = planner::layout_keeping(p, *current_).value_or(*current_);
  } else if (cfg_.hysteresis && current_ && events_.empty()) {  // hysteresis, unless devices came or went
    const double noise = std::max(cfg_.planner.replan_margin, noise_);
    const auto c = planner::check_switch(p, *current_, *next, q, cfg_.planner.plan_steps, noise);
    if (c.keep || c.instead) {
      ++kept_;
      d.kept_why = c.why + " (proposed " + planner::describe(*next) + ")";
      *next = c.instead ? *c.instead : *current_;
    }
  }
  d.plan = *next;
  if (cfg_.explain) d.reason = (d.reverted_why.empty() ? "" : d.reverted_why + "; ") + explain(p, *next);
  if (auto r = planner::evaluate(p, *next, previous, q)) d.predicted_s = r->batch_time_s;
  d.queue = queues_.cost_backlog();
  d.kept_plans = kept_;
  d.reverted_plans = reverted_;
  // A change goes on trial against what the plan before it measured this slot.
  const bool changed = current_ && !(current_->groups == next->groups);
  if (changed) trial_.reset();
  if (changed && !back && cfg_.regret && events_.empty() && steady.time_s.size() >= 2) {
    trial_ = trial{*current_, steady, {}, 0};
    if (auto before = planner::evaluate(p, *current_, &*current_, q)) trial_->before_pred = before->batch_time_s;
  }
  events_.clear();
  decided_speeds_ = speeds();
  if (!current_ || !(current_->groups == next->groups)) first_step_ = true;
  if (auto ahead = planner::evaluate(p, *next, &*next, q)) decided_pred_ = ahead->batch_time_s;
  before_ = current_;
  current_ = *next;
  return d;
}

// One noisy slot never drops a device: a proposal that leaves out a device of the plan in
// force, still available, whose estimate fell by more than a quarter over the last slot alone
// keeps the layout (re-shared); if the next slot measures the device slow too, the drop goes ahead.
std::string controller::doubted_drop(const planner::cluster_state& view, const planner::plan& next) {
  auto in = [](const planner::plan& p, int id) {
    for (const auto& g : p.groups)
      if (std::count(g.devices.begin(), g.devices.end(), id)) return true;
    return false;
  };
  std::string why;
  if (current_ && events_.empty())
    for (std::size_t i = 0; i < view.devices.size() && i < decided_speeds_.size(); ++i) {
      const auto& dev = view.devices[i];
      const double was = decided_speeds_[i];
      if (dev.available && in(*current_, dev.id) && !in(next, dev.id) && was > 0 && dev.speed < 0.75 * was && !doubted_.count(dev.id)) {
        doubted_.insert(dev.id);
        char buf[160];
        std::snprintf(buf, sizeof buf, "kept device %d: measured at speed %.3g (was %.3g) in one slot only", dev.id, dev.speed, was);
        why += (why.empty() ? "" : "; ") + std::string(buf);
      }
    }
  if (why.empty()) doubted_.clear();
  return why;
}

void controller::revoke(const std::string& why) {
  current_ = before_;
  trial_.reset();
  first_step_ = true;
  events_.push_back(why);
}

void controller::restore(const controller_snapshot& s) {
  queues_.restore(s.queues);
  estimates_.restore(s.estimates);
}

// Why this plan: what changed since the last decision, then the planner's own account.
std::string controller::explain(const planner::problem& p, const planner::plan& next) const {
  std::ostringstream os;
  for (const auto& e : events_) os << e << "; ";
  for (std::size_t i = 0; i < p.cluster.devices.size() && i < decided_speeds_.size(); ++i) {
    const double was = decided_speeds_[i], now = p.cluster.devices[i].speed;
    if (was > 0 && p.cluster.devices[i].available && std::abs(now - was) > 0.15 * was)
      os << "device " << p.cluster.devices[i].id << " measured at speed " << now << " (was " << was << "); ";
  }
  const auto q = queues_.state();
  if (current_)
    if (auto old = planner::evaluate(p, *current_, nullptr, q))
      os << "old plan now predicted " << old->batch_time_s * 1e3 << " ms; ";
  if (auto r = planner::evaluate(p, next, current_ ? &*current_ : nullptr, q)) {
    os << "new plan " << r->batch_time_s * 1e3 << " ms (compute " << r->compute_s * 1e3 << ", sums " << r->sync_s * 1e3
       << ", updates " << r->update_s * 1e3 << ", migration " << r->migration_s * 1e3 << ")";
    for (const auto& g : r->groups)
      if (g.time_s == r->compute_s) os << ", bottleneck " << g.bottleneck;
    if (cfg_.budget.has_cost()) os << ", cost queue " << q.cost << " budgets";
  }
  return os.str();
}

}  // namespace dynapar::control
