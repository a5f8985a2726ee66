#include "live_dashboard.hpp"

#include <cstdio>

#include "config/report_json.hpp"
#include "planner/plan.hpp"

namespace dynapar::cli {
using nlohmann::json;

namespace {
constexpr std::size_t max_events = 200;

json& device(json& state, int id) {
  for (auto& d : state["devices"])
    if (d["id"] == id) return d;
  state["devices"].push_back({{"id", id}, {"state", "unknown"}});
  return state["devices"].back();
}
}  // namespace

live_dashboard::live_dashboard(std::unique_ptr<dashboard::server> s, const training::prepared_job& prep) : server_(std::move(s)) {
  const auto& j = prep.job;
  state_ = {{"job", j.name},           {"model", j.model}, {"steps", prep.settings.steps}, {"batch", prep.settings.batch},
            {"step", 0},               {"policy", j.policy}, {"plan", json::array()}, {"devices", json::array()},
            {"events", json::array()}, {"plan_changes", 0}, {"faults", 0},             {"done", false}};
  state_["budget"] = j.cluster.budget.has_cost() ? json(j.cluster.budget.cost_per_slot) : json(nullptr);
  for (const auto& d : j.cluster.cluster.devices)
    state_["devices"].push_back({{"id", d.id},
                                 {"name", d.name},
                                 {"speed", d.speed},
                                 {"price_per_hour", d.price_per_s * 3600},
                                 {"memory_gb", d.memory_bytes / 1e9},
                                 {"state", "waiting"}});
  publish();
}

void live_dashboard::note(std::int64_t step, const std::string& text) {
  events_.push_back("step " + std::to_string(step) + ": " + text);
  if (events_.size() > max_events) events_.pop_front();
  state_["events"] = json(events_);
}

void live_dashboard::plan(const training::plan_record& r) {
  state_["plan"] = config::plan_to_json(r.plan)["groups"];
  state_["plan_brief"] = planner::brief(r.plan);
  state_["predicted_step_s"] = r.predicted_s;
  if (r.step > 0) state_["plan_changes"] = state_["plan_changes"].get<int>() + 1;
  for (int id : r.joined) device(state_, id);  // a device not in the job file (a node's own)
  for (auto& d : state_["devices"]) {
    bool used = false;
    for (const auto& g : r.plan.groups)
      for (int id : g.devices) used = used || d["id"] == id;
    if (used) d["state"] = "in plan";
    else if (d["state"] == "in plan") d["state"] = "idle";
  }
  for (int id : r.left) device(state_, id)["state"] = "left";
  note(r.step, "plan " + planner::brief(r.plan) + " (" + std::to_string(r.layers_moved) + " layers moved): " + r.reason.substr(0, 160));
  publish();
}

void live_dashboard::step(const training::step_record& r, const report::progress_meter& m) {
  cost_sum_ += r.cost;
  ++cost_steps_;
  state_["step"] = r.step + 1;
  state_["step_time_s"] = r.time_s;
  state_["samples_per_s"] = m.samples_per_s();
  state_["loss"] = r.loss;
  state_["cost"] = r.cost;
  state_["avg_cost"] = cost_sum_ / static_cast<double>(cost_steps_);
  state_["cost_queue"] = r.cost_queue;
  if (auto eta = m.eta_s()) state_["eta_s"] = *eta;
  for (const auto& st : r.stages) {
    auto& d = device(state_, st.device);
    d["compute_s"] = st.compute_s;
    d["wait_s"] = st.wait_s;
  }
  publish();
}

void live_dashboard::fault(const training::fault_record& r) {
  if (r.event == "injected") state_["faults"] = state_["faults"].get<int>() + 1;
  if (r.event == "lost" && r.device >= 0) device(state_, r.device)["state"] = "lost";
  note(r.step, r.event + (r.kind.empty() ? "" : " " + r.kind) + (r.device >= 0 ? " device " + std::to_string(r.device) : "") +
                   (r.detail.empty() ? "" : ": " + r.detail.substr(0, 120)));
  publish();
}

void live_dashboard::epoch(std::int64_t epoch, double score, const std::string& metric) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", score);
  state_["test_" + metric] = score;
  note(state_["step"].get<std::int64_t>(), "epoch " + std::to_string(epoch) + " ends: test " + metric + " " + buf);
  publish();
}

void live_dashboard::finish(const json& summary) {
  state_["done"] = true;
  state_["summary"] = summary;
  note(state_["step"].get<std::int64_t>(), "run finished");
  publish();
}

}  // namespace dynapar::cli
