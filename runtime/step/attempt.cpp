#include "step/attempt.hpp"

#include <algorithm>
#include <utility>

namespace dynapar::step {

attempt::attempt(std::int64_t tag, planner::plan p, layout l, const schedule::pace_noise& paces, attempt_options o)
    : tag_(tag), p_(std::move(p)), l_(std::move(l)), o_(o), trust_(paces.trust()), progress_(p_.groups.size()), rest_(p_.groups.size(), -1) {
  for (std::size_t g = 0; g < p_.groups.size(); ++g) {
    const auto& gp = p_.groups[g];
    devices_ += gp.devices.size();
    progress_[g].prior_s = paces.prior(gp.devices[0]);
    progress_[g].samples = l_.probe[g];
    progress_[g].first_samples = std::min(l_.probe[g], gp.micro_batch);
  }
}

void attempt::sent(std::size_t g, double now) {
  if (g < progress_.size()) progress_[g].started_s = now;
}

int attempt::taker(int device) const {
  for (std::size_t g = 0; g < p_.groups.size(); ++g)
    if (l_.probes(g) && p_.groups[g].devices[0] == device) return static_cast<int>(g);
  return -1;
}

std::vector<slice> attempt::interim(int device, int kind, double compute_s, double now) {
  if (!note(device, kind, compute_s, now) || kind != 2) return {};
  return decide(now);
}

bool attempt::note(int device, int kind, double compute_s, double now) {
  const int g = taker(device);
  if (g < 0) return false;
  auto& pr = progress_[g];
  if (kind == 1) pr.forward_s = compute_s;
  if (kind == 2) {
    pr.done_s = now;
    pr.compute_s = compute_s;
  }
  return true;
}

std::vector<slice> attempt::decide(double now) {
  if (std::any_of(rest_.begin(), rest_.end(), [](int r) { return r >= 0; })) return {};  // dispatched already
  std::vector<std::size_t> takers;
  std::vector<schedule::prospect> prospects;
  for (std::size_t h = 0; h < p_.groups.size(); ++h)
    if (l_.probes(h)) {
      takers.push_back(h);
      prospects.push_back(schedule::prospect_of(progress_[h], now, o_.work_over_fwd, trust_));
    }
  const auto given = schedule::dispatch_samples(prospects, l_.pool, l_.unit);
  for (std::size_t k = 0; k < takers.size(); ++k) rest_[takers[k]] = given[k];
  return rest_slices(l_, rest_);
}

std::vector<int> attempt::stage_done(int device, double now) {
  ready_s_[device] = now;
  if (o_.overlap_sums) return {device};
  return {};
}

std::vector<int> attempt::group_done(double loss_sum, double time_s, const std::vector<control::stage_figures>& stages, double now) {
  loss_sum_ += loss_sum;
  pipeline_s_ = std::max(pipeline_s_, time_s);
  stages_.insert(stages_.end(), stages.begin(), stages.end());
  if (++groups_done_ < p_.groups.size()) return {};
  pipelines_s_ = now;
  std::vector<int> out;
  if (!o_.overlap_sums)
    for (const auto& [id, at] : ready_s_) out.push_back(id);
  return out;
}

std::vector<std::vector<double>> attempt::ready_by_stage() const {
  std::vector<std::vector<double>> out;
  for (const auto& gp : p_.groups) {
    out.emplace_back();
    for (int id : gp.devices) {
      const auto it = ready_s_.find(id);
      out.back().push_back(it == ready_s_.end() ? 0.0 : it->second);
    }
  }
  return out;
}

int attempt::ran(int device) const {
  if (const int g = taker(device); g >= 0) return l_.probe[g] + std::max(0, rest_[g]);
  for (const auto& gp : p_.groups)
    if (std::count(gp.devices.begin(), gp.devices.end(), device)) return gp.share;
  return 0;
}

control::measurement attempt::measure() const {
  control::measurement m;
  std::vector<std::pair<int, double>> compute_s;
  for (const auto& st : stages_) {
    compute_s.emplace_back(st.device, st.compute_s);
    m.links.insert(m.links.end(), st.links.begin(), st.links.end());
  }
  m.stages = control::stages_of(p_, compute_s);
  for (auto& st : m.stages)  // dispatched: what each probe's device ran in all
    if (const int g = taker(st.device); g >= 0) {
      st.samples = ran(st.device);
      st.micro_batches = dispatched_micro_batches(l_.probe[g], rest_[g], p_.groups[g].micro_batch);
    }
  return m;
}

std::vector<control::stage_figures> attempt::stage_times() const {
  auto out = stages_;
  for (auto& st : out) st.samples = ran(st.device);
  return out;
}

void attempt::teach(schedule::pace_noise& paces) const {
  for (const auto& st : stages_)
    if (const int g = taker(st.device); g >= 0 && rest_[g] > 0 && st.compute_s > progress_[g].compute_s)
      paces.observe(st.device, progress_[g].compute_s / l_.probe[g], (st.compute_s - progress_[g].compute_s) / rest_[g]);
}

void attempt::sum_held(int device, double bytes_in) { sum_bytes_[device] += bytes_in; }

void attempt::commit(std::map<int, std::vector<int>> buckets) {
  committed_ = true;
  confirmed_.begin(tag_, std::move(buckets));
}

bool attempt::applied(int device, std::int64_t tag, int layer) { return committed_ && confirmed_.confirm(device, tag, layer); }

std::set<int> attempt::unconfirmed(const std::map<int, std::vector<int>>& holders, const std::function<bool(int)>& in_run) const {
  return confirmed_.missing(holders, in_run);
}

}  // namespace dynapar::step
