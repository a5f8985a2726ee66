#include "planner/problem.hpp"

namespace dynapar::planner {

problem::problem(const model_profile& m, const cluster_state& c, planner_config cfg_in, budgets b)
    : model(m), cluster(c), cfg(std::move(cfg_in)), budget(std::move(b)), sums(m), links(c) {
  for (std::size_t i = 0; i < c.devices.size(); ++i)
    if (c.devices[i].available) available.push_back(static_cast<int>(i));
}

double problem::floor_s() const {
  double speed_sum = 0;
  for (int i : available) speed_sum += speed(i);
  return speed_sum > 0 ? cfg.batch * sums.total_work() / speed_sum : unlimited;
}

status validate(const model_profile& m, const cluster_state& c, const planner_config& cfg) {
  if (auto s = validate(m); !s) return s;
  if (auto s = validate(c); !s) return s;
  if (cfg.batch < 1) return make_error("bad_config", "batch must be >= 1");
  if (cfg.micro_batch < 0) return make_error("bad_config", "micro_batch must be >= 0 (0 = auto)");
  if (cfg.micro_batch == 0 && cfg.micro_batch_candidates.empty())
    return make_error("bad_config", "micro_batch_candidates is empty");
  for (int u : cfg.micro_batch_candidates)
    if (u < 1) return make_error("bad_config", "micro_batch_candidates must be >= 1");
  if (!(cfg.v > 0)) return make_error("bad_config", "V must be > 0");
  if (cfg.eval_budget < 1) return make_error("bad_config", "eval_budget must be >= 1");
  if (cfg.warm_eval_budget < 1) return make_error("bad_config", "warm_eval_budget must be >= 1");
  if (cfg.share_quantum < 1 || cfg.batch % cfg.share_quantum != 0)
    return make_error("bad_config", "batch must be a multiple of share_quantum (" + std::to_string(cfg.share_quantum) + ")");
  if (!(cfg.replan_margin >= 0)) return make_error("bad_config", "replan_margin must be >= 0");
  if (cfg.max_stages < 1) return make_error("bad_config", "max_stages must be >= 1");
  return ok_status();
}

}  // namespace dynapar::planner
