#include "sim/emulated_cluster.hpp"

#include <algorithm>
#include <limits>

#include "planner/time_model.hpp"

namespace dynapar::sim {

emulated_cluster::emulated_cluster(scenario s)
    : scenario_(std::move(s)), world_(scenario_), truth_(scenario_.cluster),
      links_(std::make_unique<planner::link_table>(truth_)) {}

void emulated_cluster::enter_slot(int slot) {
  truth_ = world_.at(slot);
  links_ = std::make_unique<planner::link_table>(truth_);
}

std::pair<double, double> emulated_cluster::link(int a, int b) const {
  const int i = links_->index_of(a), j = links_->index_of(b);
  if (i < 0 || j < 0) return {std::numeric_limits<double>::infinity(), 0.0};
  return {links_->bw(i, j), links_->lat(i, j)};
}

double emulated_cluster::true_speed(int id) const {
  const int i = links_->index_of(id);
  const auto slow = slow_.find(id);
  const double factor = slow == slow_.end() ? 1.0 : slow->second.factor;
  return i < 0 ? factor : std::clamp(truth_.devices[i].speed * factor, 1e-3, 1.0);
}

std::vector<int> emulated_cluster::slow_downs_over(std::int64_t t) {
  std::vector<int> over;
  for (auto it = slow_.begin(); it != slow_.end();) {
    if (t < it->second.until) {
      ++it;
      continue;
    }
    over.push_back(it->first);
    it = slow_.erase(it);
  }
  return over;
}

double emulated_cluster::price_per_s(int id) const {
  const int i = links_->index_of(id);
  return i < 0 ? 0.0 : truth_.devices[i].price_per_s;
}

double emulated_cluster::power_w(int id) const {
  const int i = links_->index_of(id);
  return i < 0 ? 0.0 : truth_.devices[i].power_w;
}

std::vector<planner::sum_segment> emulated_cluster::sums(const planner::model_profile& m, int batch, const planner::plan& plan,
                                                         bool overlap) const {
  if (plan.groups.size() < 2) return {};
  planner::planner_config cfg;
  cfg.batch = batch;
  cfg.overlap_sums = overlap;
  const planner::problem p(m, truth_, cfg);
  std::vector<planner::group_shape> shapes;
  for (const auto& g : plan.groups) {
    std::vector<int> idx;
    for (int id : g.devices) idx.push_back(p.links.index_of(id));
    if (std::count(idx.begin(), idx.end(), -1)) return {};
    shapes.push_back(planner::make_shape(p, idx, g.splits, g.micro_batch));
  }
  std::vector<const planner::group_shape*> active;
  std::vector<double> shares;
  for (const auto& sh : shapes) active.push_back(&sh);
  for (const auto& g : plan.groups) shares.push_back(g.share);
  return planner::sum_segments(p, active, shares);
}

}  // namespace dynapar::sim
