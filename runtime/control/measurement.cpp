#include "control/measurement.hpp"

namespace dynapar::control {

std::vector<stage_measure> stages_of(const planner::plan& p, const std::vector<std::pair<int, double>>& compute_s) {
  std::vector<stage_measure> out;
  for (const auto& g : p.groups)
    for (std::size_t j = 0; j < g.devices.size(); ++j) {
      stage_measure st;
      st.device = g.devices[j];
      st.first_layer = g.splits[j];
      st.end_layer = g.splits[j + 1];
      st.samples = g.share;
      st.micro_batches = planner::micro_batches(g.share, g.micro_batch);
      for (const auto& [id, s] : compute_s)
        if (id == st.device) st.compute_s = s;
      out.push_back(st);
    }
  return out;
}

void price(measurement& m, const std::function<double(int)>& price_per_s, const std::function<double(int)>& power_w) {
  double per_s = 0;
  m.energy_j.clear();
  for (const auto& st : m.stages) {
    per_s += price_per_s(st.device);
    m.energy_j.emplace_back(st.device, power_w(st.device) * st.compute_s);
  }
  m.cost = per_s * m.time_s;
}

}  // namespace dynapar::control
