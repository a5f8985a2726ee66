// The run's state as the dashboard serves it (runtime/dashboard), kept from the training
// callbacks: the cluster, the plan in force, per-device timings and states, step figures,
// cost and queue against the budget, and the event log.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "training/records.hpp"
#include "dashboard/dashboard.hpp"
#include "training/prepare.hpp"
#include "report/progress.hpp"

namespace dynapar::cli {

class live_dashboard {
 public:
  live_dashboard(std::unique_ptr<dashboard::server> s, const training::prepared_job& prep);
  void plan(const training::plan_record& r);
  void step(const training::step_record& r, const report::progress_meter& m);
  void fault(const training::fault_record& r);
  // `metric`: model::metric_name, "accuracy" or a regression's "mse".
  void epoch(std::int64_t epoch, double score, const std::string& metric);
  void finish(const nlohmann::json& summary);
  int port() const { return server_->port(); }

 private:
  void note(std::int64_t step, const std::string& text);
  void publish() { server_->publish(state_); }
  std::unique_ptr<dashboard::server> server_;
  nlohmann::json state_;
  std::deque<std::string> events_;
  double cost_sum_ = 0;
  std::int64_t cost_steps_ = 0;
};

}  // namespace dynapar::cli
