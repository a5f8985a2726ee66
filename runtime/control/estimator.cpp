#include "control/estimator.hpp"

#include <algorithm>
#include <cmath>

namespace dynapar::control {

estimator::estimator(const planner::cluster_state& nominal, const planner::model_profile& model, double smoothing)
    : nominal_(nominal), sums_(model), alpha_(smoothing) {
  for (const auto& d : nominal.devices) speed_.push_back(d.speed);
  recent_ = prior_ = speed_;
  shifted_.assign(speed_.size(), 0);
  seen_.assign(speed_.size(), false);
  guessed_.assign(speed_.size(), false);
}

// A level shift (a device slowed or sped up for good) is taken at once: when the recent
// estimate has stayed more than `shift_ratio` away from the smoothed one, on the same side,
// for `shift_steps` steps in a row, the smoothed one restarts there. Noise and short bursts
// rarely last that long on one side; a smoothing of 0.1 would take some 20 steps to follow.
void estimator::fold_speed(std::size_t i, double measured) {
  seen_[i] = true;
  if (guessed_[i]) {  // the estimate was a guess (end_slot): the first measurement replaces it
    speed_[i] = recent_[i] = measured;
    shifted_[i] = 0;
    guessed_[i] = false;
    return;
  }
  speed_[i] = (1 - alpha_) * speed_[i] + alpha_ * measured;
  recent_[i] = (1 - fast_alpha) * recent_[i] + fast_alpha * measured;
  const double off = recent_[i] / speed_[i] - 1;
  const int side = off > shift_ratio ? 1 : off < -shift_ratio ? -1 : 0;
  shifted_[i] = side == 0 || side * shifted_[i] < 0 ? side : shifted_[i] + side;
  if (std::abs(shifted_[i]) >= shift_steps) {
    speed_[i] = recent_[i];
    shifted_[i] = 0;
  }
}

void estimator::observe(const measurement& step, const planner::problem& announced) {
  for (const auto& s : step.stages) {
    const int i = announced.links.index_of(s.device);
    if (i < 0 || s.compute_s <= 0) continue;
    const double work = s.samples * sums_.work(s.first_layer, s.end_layer) + s.micro_batches * sums_.fixed(s.first_layer, s.end_layer);
    fold_speed(static_cast<std::size_t>(i), work / s.compute_s);
  }
  for (const auto& l : step.links) {
    const int a = announced.links.index_of(l.from), b = announced.links.index_of(l.to);
    if (a < 0 || b < 0 || l.bytes <= 0) continue;
    const double lat = announced.links.lat(a, b);
    const double transfer = l.busy_s - l.transfers * lat;
    if (transfer <= 0) continue;
    // Which tier: compare with the nominal table.
    const auto& da = announced.cluster.devices[a];
    const auto& db = announced.cluster.devices[b];
    const int tier = (da.node >= 0 && da.node == db.node) ? 0 : da.rack == db.rack ? 1 : 2;
    const auto& t = tier == 0 ? nominal_.tiers.same_node : tier == 1 ? nominal_.tiers.same_rack : nominal_.tiers.cross_rack;
    const double bw = l.bytes / transfer;
    const double cap = std::min(da.nic_bw, db.nic_bw);
    if (bw >= 0.999 * cap) continue;  // limited by the device's NIC, not the tier
    tier_mult_[tier] = (1 - alpha_) * tier_mult_[tier] + alpha_ * bw / t.bw;
  }
}

void estimator::announce(int device_id, double speed) {
  for (std::size_t i = 0; i < nominal_.devices.size(); ++i)
    if (nominal_.devices[i].id == device_id) {
      speed_[i] = recent_[i] = prior_[i] = speed;
      shifted_[i] = 0;
      guessed_[i] = false;
    }
}

// In ratios: a device measured at a tenth of its speed looks at a third after 4 unmeasured
// slots and at 0.56 after 8; one at 0.002 (a near stop), at 0.045 and 0.21.
void estimator::end_slot() {
  const double keep = std::exp2(-1.0 / unseen_half_life_slots);
  for (std::size_t i = 0; i < speed_.size(); ++i) {
    if (!seen_[i] && speed_[i] > 0 && prior_[i] > 0 && speed_[i] != prior_[i]) {
      speed_[i] = prior_[i] * std::pow(speed_[i] / prior_[i], keep);
      guessed_[i] = true;
    }
    seen_[i] = false;
  }
}

planner::cluster_state estimator::view(const planner::cluster_state& announced, const std::vector<int>& hidden) const {
  planner::cluster_state v = announced;
  for (std::size_t i = 0; i < v.devices.size(); ++i) {
    v.devices[i].speed = speed_[i];
    if (std::find(hidden.begin(), hidden.end(), v.devices[i].id) != hidden.end()) v.devices[i].available = true;
  }
  v.tiers.same_node.bw = nominal_.tiers.same_node.bw * tier_mult_[0];
  v.tiers.same_rack.bw = nominal_.tiers.same_rack.bw * tier_mult_[1];
  v.tiers.cross_rack.bw = nominal_.tiers.cross_rack.bw * tier_mult_[2];
  return v;
}

estimator::learnt estimator::snapshot() const {
  learnt l;
  l.speeds = speed_;
  for (int i = 0; i < 3; ++i) l.tiers[i] = tier_mult_[i];
  return l;
}

void estimator::restore(const learnt& l) {
  if (l.speeds.size() != speed_.size()) return;
  speed_ = recent_ = l.speeds;
  shifted_.assign(speed_.size(), 0);
  seen_.assign(speed_.size(), false);
  guessed_.assign(speed_.size(), false);
  for (int i = 0; i < 3; ++i) tier_mult_[i] = l.tiers[i];
}

}  // namespace dynapar::control
