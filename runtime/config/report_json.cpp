#include "config/report_json.hpp"

namespace dynapar::config {
using nlohmann::json;

json plan_to_json(const planner::plan& p) {
  json groups = json::array();
  for (const auto& g : p.groups)
    groups.push_back({{"devices", g.devices}, {"splits", g.splits}, {"share", g.share}, {"micro_batch", g.micro_batch}});
  return {{"slot", p.slot}, {"schedule", planner::to_string(p.schedule)}, {"groups", groups}};
}

json report_to_json(const std::string& policy, const planner::plan_report& r) {
  json groups = json::array();
  for (const auto& g : r.groups)
    groups.push_back({{"devices", g.devices},          {"splits", g.splits},   {"share", g.share},
                      {"micro_batch", g.micro_batch},  {"time_s", g.time_s},   {"bottleneck", g.bottleneck},
                      {"bottleneck_s", g.bottleneck_s}, {"stage_s", g.stage_s}, {"link_s", g.link_s}});
  json energy = json::object();
  for (const auto& [id, e] : r.device_energy_j) energy[std::to_string(id)] = e;
  return {{"policy", policy},
          {"batch_time_s", r.batch_time_s},
          {"compute_s", r.compute_s},
          {"sync_s", r.sync_s},
          {"migration_s", r.migration_s},
          {"bytes_migrated", r.bytes_migrated},
          {"floor_s", r.floor_s},
          {"efficiency", r.efficiency},
          {"cost", r.cost},
          {"energy_j", r.energy_j},
          {"device_energy_j", energy},
          {"score", {{"total", r.score}, {"v_time", r.time_term}, {"q_cost", r.cost_term}, {"z_energy", r.energy_term}}},
          {"groups", groups}};
}

}  // namespace dynapar::config
