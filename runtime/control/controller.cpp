#include "control/controller.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "planner/evaluate.hpp"
#include "planner/hysteresis.hpp"

namespace dynapar::control {

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

void controller::join(int id, double measured_speed) {
  set_available(id, true);
  estimates_.announce(id, measured_speed);
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
  if (!first_step_ && m.time_s > 0) slot_times_.push_back(m.time_s);
  first_step_ = false;
}

// One queue update a slot, with the slot's mean cost a step: the budget bounds the average
// step, and the queue moves at the pace of the decisions it steers. Energy likewise: each
// device's mean joules a step against its budget.
void controller::close_slot() {
  if (slot_steps_ == 0) return;
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
void controller::update_bias() {
  const std::vector<double> times = std::move(slot_times_);
  slot_times_.clear();
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

planner::queue_state controller::planning_state() const {
  auto q = queues_.state();
  if (!recent_bias_.empty()) q.time_ratio = std::exp(log_bias_);
  return q;
}

result<decision> controller::decide(std::int64_t slot, const std::vector<int>& hidden) {
  if (!policy_) return make_error("bad_policy", "the controller has no policy");
  close_slot();
  update_bias();
  const planner::queue_state q = planning_state();
  const planner::cluster_state view = estimates_.view(cfg_.cluster, hidden);
  const planner::problem p(cfg_.profile, view, cfg_.planner, cfg_.budget);
  const planner::plan* previous = current_ ? &*current_ : nullptr;
  auto next = policy_->decide({p, previous, q, slot});
  if (!next) return next.err();
  decision d;
  // Hysteresis, unless devices came or went since the last decision.
  if (cfg_.hysteresis && current_ && events_.empty()) {
    const double noise = std::max(cfg_.planner.replan_margin, noise_);
    const auto c = planner::check_switch(p, *current_, *next, q, cfg_.plan_lifetime_steps, noise);
    if (c.keep || c.instead) {
      ++kept_;
      d.kept_why = c.why + " (proposed " + planner::describe(*next) + ")";
      *next = c.instead ? *c.instead : *current_;
    }
  }
  d.plan = *next;
  if (cfg_.explain) d.reason = explain(p, *next);
  if (auto r = planner::evaluate(p, *next, previous, q)) d.predicted_s = r->batch_time_s;
  d.queue = queues_.cost_backlog();
  d.kept_plans = kept_;
  events_.clear();
  decided_speeds_.clear();
  for (const auto& dev : view.devices) decided_speeds_.push_back(dev.available ? dev.speed : 0.0);
  if (!current_ || !(current_->groups == next->groups)) first_step_ = true;
  if (auto steady = planner::evaluate(p, *next, &*next, q)) decided_pred_ = steady->batch_time_s;
  before_ = current_;
  current_ = *next;
  return d;
}

void controller::revoke(const std::string& why) {
  current_ = before_;
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
