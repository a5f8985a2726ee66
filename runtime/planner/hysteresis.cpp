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
  const double migration_share = next->migration_s / (std::max(1.0, lifetime_steps) * now->batch_time_s);
  c.threshold = noise + migration_share;
  c.keep = c.gain <= c.threshold;
  char buf[320];
  if (c.keep) {
    std::snprintf(buf, sizeof buf,
                  "kept the plan: the best other plan gains %.1f %% a step, under the prediction noise %.1f %% plus its "
                  "migration %.1f ms spread over %.0f steps (%.1f %%)",
                  100 * c.gain, 100 * noise, 1e3 * next->migration_s, lifetime_steps, 100 * migration_share);
    c.why = buf;
    return c;
  }
  // A plan that moves layers must also beat the best one that moves none by as much: the
  // current layout with shares re-solved often takes most of the gain, and the layers moved
  // for the rest within the noise would likely move back.
  if (diff(&current, proposed).moves.empty()) return c;
  auto stay = layout_keeping(p, current);
  if (!stay) return c;
  const auto stay_r = evaluate(p, *stay, &current, q);
  if (!stay_r || !(stay_r->score > 0) || !diff(&current, *stay).moves.empty()) return c;
  const double over = (stay_r->score - steady->score) / stay_r->score;
  if (over > c.threshold) return c;
  std::snprintf(buf, sizeof buf,
                "kept the layers in place: the best plan gains %.1f %% a step, but only %.1f %% over re-solving the "
                "shares of the current layout, under the prediction noise %.1f %% plus its migration %.1f ms spread "
                "over %.0f steps (%.1f %%)",
                100 * c.gain, 100 * over, 100 * noise, 1e3 * next->migration_s, lifetime_steps, 100 * migration_share);
  c.why = buf;
  if (stay_r->score >= now->score || stay->groups == current.groups) {
    c.keep = true;
  } else {
    stay->slot = proposed.slot;
    c.instead = std::move(stay);
  }
  return c;
}

}  // namespace dynapar::planner
