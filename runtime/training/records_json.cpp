#include "training/records_json.hpp"

#include <string>

#include "config/report_json.hpp"

namespace dynapar::training {
namespace {

using nlohmann::json;

// By device, keyed "id" as the job's energy budgets are.
json by_device(const std::map<int, double>& m) {
  json out = json::object();
  for (const auto& [id, v] : m) out[std::to_string(id)] = v;
  return out;
}

json energy_budget_json(const planner::budgets& b) {
  json out = json::object();
  for (const auto& e : b.energy_per_slot) out[std::to_string(e.device_id)] = e.joules_per_slot;
  return out;
}

}  // namespace

json step_json(const step_record& r) {
  json stages = json::array();
  for (const auto& st : r.stages)
    stages.push_back({{"device", st.device}, {"compute_s", st.compute_s}, {"wait_s", st.wait_s}, {"idle_s", st.idle_s}, {"messages", st.messages}, {"samples", st.samples}});
  return {{"step", r.step},
          {"loss", r.loss},
          {"lr", r.lr},
          {"time_s", r.time_s},
          {"pipeline_s", r.pipeline_s},
          {"sync_s", r.sync_s},
          {"update_s", r.update_s},
          {"migration_s", r.migration_s},
          {"bytes_migrated", r.bytes_migrated},
          {"cost", r.cost},
          {"predicted_s", r.predicted_s},
          {"cost_queue", r.cost_queue},
          {"controller_wait_s", r.controller_wait_s},
          {"stages", stages}};
}

json plan_json(const plan_record& r) {
  return {{"step", r.step},
          {"slot", r.slot},
          {"plan", config::plan_to_json(r.plan)},
          {"describe", planner::describe(r.plan)},
          {"reason", r.reason},
          {"predicted_step_s", r.predicted_s},
          {"cost_queue", r.queue},
          {"layers_moved", r.layers_moved},
          {"bytes_migrated", r.bytes_migrated},
          {"migration_s", r.migration_s},
          {"joined", r.joined},
          {"left", r.left}};
}

json fault_json(const fault_record& r) {
  return {{"event", r.event},   {"step", r.step},     {"kind", r.kind},      {"device", r.device},
          {"source", r.source}, {"detail", r.detail}, {"seconds", r.seconds}};
}

json summary_json(const config::job& j, int batch, const train_outcome& o, const run_facts& f) {
  json s = {{"job", j.name},
            {"model", j.model},
            {"steps", o.steps},
            {"batch", batch},
            {"mean_step_time_s", o.mean_step_time_s},
            {"samples_per_s", o.samples_per_s},
            {"test_metric", f.test_metric},
            {"final_test_" + f.test_metric, f.test_accuracy},
            {"plan", config::plan_to_json(f.first_plan)},
            {"replica_hash_checks", o.hash_checks},
            {"samples_lost", o.ledger.lost},
            {"samples_duplicated", o.ledger.duplicated},
            {"exact", j.exact},
            {"replans", o.replans},
            {"layers_moved", o.layers_moved},
            {"plans_kept", o.plans_kept},
            {"plans_reverted", o.plans_reverted},
            {"bytes_migrated", o.bytes_migrated},
            {"joins", o.joins},
            {"leaves", o.leaves},
            {"avg_cost", o.avg_cost},
            {"budget", j.cluster.budget.has_cost() ? json(j.cluster.budget.cost_per_slot) : json(nullptr)},
            {"avg_energy_j", by_device(o.avg_energy_j)},
            {"energy_budget_j", energy_budget_json(j.cluster.budget)},
            {"emulation_scale", f.emulation_scale},
            {"final_plan", config::plan_to_json(o.final_plan)},
            {"final_plan_brief", planner::brief(o.final_plan)},
            {"resumed_from_step", o.resumed_from},
            {"faults_injected", o.faults_injected},
            {"devices_lost", o.devices_lost},
            {"recoveries", o.recoveries},
            {"step_retries", o.step_retries},
            {"mean_recovery_s", o.mean_recovery_s},
            {"max_recovery_s", o.max_recovery_s},
            {"controller_wait_s_per_step", o.controller_wait_s},
            {"controller_wait_share", o.controller_wait_share},
            {"steady_steps", o.steady_steps},
            {"steps_started_early", o.steps_started_early},
            {"samples_read_ahead", f.data_reads.ahead},
            {"samples_decoded_when_read", f.data_reads.when_read},
            {"data_wait_s", f.data_reads.waited_s},
            {"checkpoints", o.checkpoints},
            {"wall_s", f.wall_s},
            {"data_plane_bytes", by_device(o.data_plane_bytes)}};
  if (!o.sum_received_bytes.empty()) {
    s["sum_received_bytes"] = by_device(o.sum_received_bytes);
    std::map<int, double> per_step;
    for (const auto& [id, b] : o.sum_received_bytes) per_step[id] = o.steps > 0 ? b / static_cast<double>(o.steps) : 0.0;
    s["sum_received_bytes_per_step"] = by_device(per_step);
  }
  if (!o.controller_tensor_bytes.empty()) {
    double total = 0;
    for (const auto& [kind, b] : o.controller_tensor_bytes) total += b;
    s["controller_tensor_bytes"] = total;
    s["controller_tensor_bytes_by_kind"] = o.controller_tensor_bytes;
    s["node_peak_rss_mb"] = o.node_peak_rss_mb;
    s["controller_tensor_bytes_per_step"] = o.steps > 0 ? total / static_cast<double>(o.steps) : 0.0;
  }
  return s;
}

}  // namespace dynapar::training
