#include "training/run_tally.hpp"

#include <algorithm>

namespace dynapar::training {

void run_tally::committed(const step_record& rec, const control::measurement& m, bool replanned, int incidents, train_outcome& out) {
  time_ += rec.time_s;
  cost_ += rec.cost;
  if (rec.step > out.resumed_from && !replanned && incidents == incidents_) {
    steady_wait_ += rec.controller_wait_s;
    steady_time_ += rec.time_s;
    ++out.steady_steps;
  }
  incidents_ = incidents;
  for (const auto& [id, j] : m.energy_j) out.avg_energy_j[id] += j;
  for (const auto& l : m.links) out.data_plane_bytes[l.from] += l.bytes;
  out.messages_per_step = 0;
  for (const auto& st : rec.stages) out.messages_per_step += st.messages;
}

void run_tally::finish(int batch, const std::vector<double>& recovery_s, train_outcome& out) const {
  const auto ran = out.steps - out.resumed_from;
  out.mean_step_time_s = ran > 0 ? time_ / static_cast<double>(ran) : 0;
  out.samples_per_s = time_ > 0 ? static_cast<double>(ran) * batch / time_ : 0;
  out.avg_cost = ran > 0 ? cost_ / static_cast<double>(ran) : 0;
  out.controller_wait_s = out.steady_steps > 0 ? steady_wait_ / out.steady_steps : 0;
  out.controller_wait_share = steady_time_ > 0 ? steady_wait_ / steady_time_ : 0;
  for (auto& [id, j] : out.avg_energy_j) j = ran > 0 ? j / static_cast<double>(ran) : 0;
  for (const double r : recovery_s) {
    out.mean_recovery_s += r / static_cast<double>(recovery_s.size());
    out.max_recovery_s = std::max(out.max_recovery_s, r);
  }
}

}  // namespace dynapar::training
