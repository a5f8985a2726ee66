#include "planner/hysteresis.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "planner/time_model.hpp"
#include "planner/water_fill.hpp"

namespace dynapar::planner {

namespace {

bool on_available(const problem& p, const group_plan& g) {
  return std::all_of(g.devices.begin(), g.devices.end(), [&](int id) {
    const int i = p.links.index_of(id);
    return i >= 0 && p.cluster.devices[i].available;
  });
}

}  // namespace

std::optional<plan> layout_keeping(const problem& p, const plan& current) {
  // Every group keeps at least one quantum: a group left out drops its layers, and they move
  // back when it returns.
  const int q = std::max(1, p.cfg.share_quantum);
  std::vector<group_shape> shapes;
  for (const auto& gp : current.groups) {
    if (!on_available(p, gp)) return std::nullopt;
    std::vector<int> devs;
    for (int id : gp.devices) devs.push_back(p.links.index_of(id));
    shapes.push_back(make_shape(p, std::move(devs), gp.splits, gp.micro_batch));
    if (!shapes.back().feasible || shapes.back().cap < q) return std::nullopt;
  }
  const int rest = p.cfg.batch - q * static_cast<int>(shapes.size());
  if (rest < 0) return std::nullopt;
  std::vector<std::function<double(int)>> time;
  std::vector<int> caps;
  for (const auto& sh : shapes) {
    time.push_back([&p, &sh, q](int b) { return group_time(p, sh, b + q); });
    caps.push_back(static_cast<int>(std::min<double>(sh.cap, p.cfg.batch)) - q);
  }
  auto extra = rest > 0 ? integer_shares(time, caps, rest, q) : std::vector<int>(shapes.size(), 0);
  if (!extra) return std::nullopt;
  plan out = current;
  for (std::size_t g = 0; g < out.groups.size(); ++g) {
    auto& gp = out.groups[g];
    gp.share = q + (*extra)[g];
    gp.micro_batch = std::min(current.groups[g].micro_batch, gp.share);
  }
  return out;
}

switch_check check_switch(const problem& p, const plan& current, const plan& proposed, const queue_state& q,
                          double lifetime_steps, double noise) {
  switch_check c;
  if (current.groups == proposed.groups) return c;
  const auto now = evaluate(p, current, &current, q);  // staying moves nothing
  const auto next = evaluate(p, proposed, &current, q);
  // A step of the new plan once it is in place (its one-off migration is the threshold's).
  const auto steady = evaluate(p, proposed, &proposed, q);
  if (!now || !next || !steady || !(now->score > 0)) return c;
  c.gain = (now->score - steady->score) / now->score;
  char buf[320];
  // Only shares change: nothing moves, and a wrong guess is undone as cheaply next slot.
  if (diff(&current, proposed).empty()) {
    c.threshold = p.cfg.replan_margin;
    c.keep = c.gain <= c.threshold;
    std::snprintf(buf, sizeof buf, "kept the plan: new shares gain %.1f %% a step, under the re-plan margin %.1f %%",
                  100 * c.gain, 100 * c.threshold);
    if (c.keep) c.why = buf;
    return c;
  }
  // Layers move or are dropped (to move back when their device returns): the gain must clear
  // the noise plus the migration over the plan's life, and do so against the best plan that
  // keeps the layout, too (the current groups with shares re-solved), which often takes most
  // of the gain; the rest, within the noise, would likely move back.
  const double migration_share = next->migration_s / (std::max(1.0, lifetime_steps) * now->batch_time_s);
  c.threshold = noise + migration_share;
  auto stay = layout_keeping(p, current);
  double stay_score = 0;
  if (stay)
    if (auto r = evaluate(p, *stay, &current, q)) stay_score = r->score;
  const bool reshare = stay_score > 0 && stay_score < now->score * (1 - p.cfg.replan_margin);
  const double base = reshare ? stay_score : now->score;
  const double over = (base - steady->score) / base;
  if (over > c.threshold) return c;
  std::snprintf(buf, sizeof buf,
                "%s: the best plan moves layers for %.1f %% a step (%.1f %% over %s), under the prediction noise "
                "%.1f %% plus its migration %.1f ms spread over %.0f steps (%.1f %%)",
                reshare ? "kept the layers in place, new shares" : "kept the plan", 100 * c.gain, 100 * over,
                reshare ? "the current layout re-shared" : "the current plan", 100 * noise, 1e3 * next->migration_s,
                lifetime_steps, 100 * migration_share);
  c.why = buf;
  if (reshare) {
    stay->slot = proposed.slot;
    c.instead = std::move(stay);
  } else {
    c.keep = true;
  }
  return c;
}

}  // namespace dynapar::planner
