#include "planner/hysteresis.hpp"

#include <algorithm>
#include <cstdio>

namespace dynapar::planner {

switch_check check_switch(const problem& p, const plan& current, const plan& proposed, const queue_state& q,
                          double lifetime_steps, double noise) {
  switch_check c;
  if (current.groups == proposed.groups) return c;
  const auto now = evaluate(p, current, &current, q);  // staying moves nothing
  const auto next = evaluate(p, proposed, &current, q);
  if (!now || !next || !(now->batch_time_s > 0) || !(next->batch_time_s > 0)) return c;
  // The score is linear in T through its time and cost terms: a step of the new plan without
  // its one-off migration scores in proportion.
  const double steady = next->score * (next->batch_time_s - next->migration_s) / next->batch_time_s;
  c.gain = (now->score - steady) / now->score;
  c.threshold = noise + next->migration_s / (std::max(1.0, lifetime_steps) * now->batch_time_s);
  c.keep = c.gain <= c.threshold;
  if (c.keep) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "kept the plan: the best other plan gains %.1f %% a step, under the prediction noise %.1f %% plus its "
                  "migration %.1f ms spread over %.0f steps (%.1f %%)",
                  100 * c.gain, 100 * noise, 1e3 * next->migration_s, lifetime_steps, 100 * (c.threshold - noise));
    c.why = buf;
  }
  return c;
}

}  // namespace dynapar::planner
