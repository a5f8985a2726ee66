// `dynapar report OUT_DIR`: a finished (or running) training run's records (metrics.jsonl,
// plans.jsonl, summary.json: docs/FORMATS.md) turned into plot tables and a gnuplot script.
// Loading names the file and line of anything wrong; the tables are pure functions of the
// records, so they are tested against hand-made runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace dynapar::report {

struct step_row {
  std::int64_t step = 0;
  double time_s = 0, loss = 0, cost = 0, predicted_s = 0, cost_queue = 0;
};

struct event_row {  // a fault, a loss, a recovery (metrics.jsonl lines with "event")
  std::int64_t step = 0;
  std::string event, kind;
  int device = -1;
};

struct group_row {
  std::vector<int> devices, splits;
  int share = 0;
};

struct plan_row {  // a plan taking effect (plans.jsonl)
  std::int64_t step = 0;
  std::vector<group_row> groups;
  double predicted_s = 0;
  std::vector<int> joined, left;
};

struct run_records {
  std::vector<step_row> steps;
  std::vector<event_row> events;
  std::vector<plan_row> plans;
  nlohmann::json summary;  // null while the run goes on
};

// Reads DIR/metrics.jsonl and DIR/plans.jsonl (and DIR/summary.json if there).
result<run_records> load_run(const std::string& dir);

// One text table per plot, whitespace-separated columns (gnuplot's format).
struct plot_tables {
  std::string steps;     // step, time ms, loss, cost, running mean cost, predicted ms, cost queue
  std::string marks;     // step, kind (1 plan change, 2 join, 3 leave, 4 fault or loss), label
  std::string timeline;  // step from, step to, device row, group, label "L0-2 b48"
  std::vector<int> devices;  // the timeline's rows, in order
};
plot_tables make_tables(const run_records& r);

// The gnuplot script that turns the tables (steps.dat, marks.dat, timeline.dat, in the same
// directory) into step_time.png, plan_timeline.png, cost.png and predicted.png.
std::string gnuplot_script(const plot_tables& t, double budget);

inline constexpr const char* plot_files[] = {"step_time.png", "plan_timeline.png", "cost.png", "predicted.png"};

}  // namespace dynapar::report
