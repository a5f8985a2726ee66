#include "report/run_report.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace dynapar::report {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// Every line of a JSON-lines file, parsed; the error names file and line.
result<std::vector<json>> read_lines(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return make_error("bad_run_dir", p.string() + " is missing: not a run directory (dynapar train/launch --out DIR writes it)");
  std::vector<json> out;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    try {
      out.push_back(json::parse(line));
      if (!out.back().is_object()) throw std::runtime_error("not a JSON object");
    } catch (const std::exception& e) {
      if (f.peek() == EOF) break;  // a run still writing: its last line may be cut short
      return make_error("bad_record", p.string() + " line " + std::to_string(n) + ": " + e.what());
    }
  }
  return out;
}

std::vector<int> ints(const json& j, const char* key) {
  std::vector<int> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& v : j[key]) out.push_back(v.get<int>());
  return out;
}
}  // namespace

result<run_records> load_run(const std::string& dir) {
  if (!fs::is_directory(dir)) return make_error("bad_run_dir", "'" + dir + "' is not a directory");
  auto metrics = read_lines(fs::path(dir) / "metrics.jsonl");
  if (!metrics) return metrics.err();
  auto plans = read_lines(fs::path(dir) / "plans.jsonl");
  if (!plans) return plans.err();
  run_records r;
  int n = 0;
  const char* where = "metrics.jsonl";
  try {
    for (const auto& m : *metrics) {
      ++n;
      if (m.contains("event")) {
        r.events.push_back({m.at("step").get<std::int64_t>(), m.at("event").get<std::string>(), m.value("kind", std::string()),
                            m.value("device", -1)});
        continue;
      }
      r.steps.push_back({m.at("step").get<std::int64_t>(), m.at("time_s").get<double>(), m.at("loss").get<double>(),
                         m.value("cost", 0.0), m.value("predicted_s", 0.0), m.value("cost_queue", 0.0)});
    }
    n = 0;
    where = "plans.jsonl";
    for (const auto& p : *plans) {
      ++n;
      plan_row row;
      row.step = p.at("step").get<std::int64_t>();
      row.predicted_s = p.value("predicted_step_s", 0.0);
      row.joined = ints(p, "joined");
      row.left = ints(p, "left");
      for (const auto& g : p.at("plan").at("groups"))
        row.groups.push_back({ints(g, "devices"), ints(g, "splits"), g.at("share").get<int>()});
      r.plans.push_back(std::move(row));
    }
  } catch (const std::exception& e) {
    return make_error("bad_record", (fs::path(dir) / where).string() + " record " + std::to_string(n) + ": " + e.what());
  }
  if (r.plans.empty()) return make_error("bad_run_dir", (fs::path(dir) / "plans.jsonl").string() + " holds no plan");
  std::ifstream s(fs::path(dir) / "summary.json");
  if (s) {
    try {
      s >> r.summary;
    } catch (const std::exception& e) {
      return make_error("bad_record", (fs::path(dir) / "summary.json").string() + ": " + e.what());
    }
  }
  return r;
}

plot_tables make_tables(const run_records& r) {
  plot_tables t;
  std::ostringstream steps, marks, timeline;
  double sum_cost = 0;
  int n = 0;
  for (const auto& s : r.steps) {
    sum_cost += s.cost;
    ++n;
    steps << s.step << " " << 1e3 * s.time_s << " " << s.loss << " " << s.cost << " " << sum_cost / n << " " << 1e3 * s.predicted_s
          << " " << s.cost_queue << "\n";
  }
  for (const auto& p : r.plans) {
    if (p.step > 0) marks << p.step << " 1 plan\n";
    for (int id : p.joined)
      if (p.step > 0) marks << p.step << " 2 join:d" << id << "\n";
    for (int id : p.left) marks << p.step << " 3 leave:d" << id << "\n";
  }
  for (const auto& e : r.events)
    if (e.event == "injected" || e.event == "lost")
      marks << e.step << " 4 " << e.event << ":" << (e.kind.empty() ? "fault" : e.kind)
            << (e.device >= 0 ? ":d" + std::to_string(e.device) : "") << "\n";
  // The timeline: each plan holds from its step to the next plan's (the last, to the run's end).
  std::set<int> devices;
  for (const auto& p : r.plans)
    for (const auto& g : p.groups) devices.insert(g.devices.begin(), g.devices.end());
  t.devices.assign(devices.begin(), devices.end());
  std::int64_t end = r.plans.back().step + 1;
  for (const auto& s : r.steps) end = std::max(end, s.step + 1);
  for (std::size_t i = 0; i < r.plans.size(); ++i) {
    const auto& p = r.plans[i];
    const std::int64_t to = i + 1 < r.plans.size() ? r.plans[i + 1].step : end;
    if (to <= p.step) continue;  // replaced before it ran a step
    for (std::size_t g = 0; g < p.groups.size(); ++g) {
      const auto& gp = p.groups[g];
      for (std::size_t j = 0; j < gp.devices.size() && j + 1 < gp.splits.size(); ++j) {
        const auto row = std::find(t.devices.begin(), t.devices.end(), gp.devices[j]) - t.devices.begin();
        timeline << p.step << " " << to << " " << row << " " << g << " L" << gp.splits[j] << "-" << gp.splits[j + 1] - 1 << "_b"
                 << gp.share << "\n";
      }
    }
  }
  t.steps = steps.str();
  t.marks = marks.str();
  t.timeline = timeline.str();
  return t;
}

std::string gnuplot_script(const plot_tables& t, double budget) {
  std::ostringstream g;
  g << "set terminal pngcairo size 1100,600 noenhanced\nset grid\nset key outside right\n";
  // Marks as impulses to the top of the plot, coloured by kind.
  const std::string marks =
      "'marks.dat' using 1:(column(2)==1 ? GPVAL_Y_MAX : 1/0) with impulses lc rgb '#2060c0' dt 2 title 'plan change', "
      "'marks.dat' using 1:(column(2)==2 ? GPVAL_Y_MAX : 1/0) with impulses lc rgb '#20a040' lw 2 title 'join', "
      "'marks.dat' using 1:(column(2)==3 ? GPVAL_Y_MAX : 1/0) with impulses lc rgb '#e08000' lw 2 title 'leave', "
      "'marks.dat' using 1:(column(2)==4 ? GPVAL_Y_MAX : 1/0) with impulses lc rgb '#d02020' lw 2 title 'fault'";
  const bool have_marks = !t.marks.empty();
  g << "set output 'step_time.png'\nset xlabel 'step'\nset ylabel 'step time (ms)'\nset title 'measured step time'\n"
       "plot 'steps.dat' using 1:2 with lines lc rgb '#404040' title 'step time'\n";
  if (have_marks) g << "set output 'step_time.png'\nreplot " << marks << "\n";
  g << "set output 'predicted.png'\nset title 'measured against predicted step time'\n"
       "plot 'steps.dat' using 1:2 with lines lc rgb '#909090' title 'measured', "
       "'steps.dat' using 1:($6 > 0 ? $6 : 1/0) with steps lw 2 lc rgb '#2060c0' title 'predicted (plan in force)'\n";
  g << "set output 'cost.png'\nset title 'cost per step and the cost queue'\nset ylabel 'cost per step'\nset y2label 'queue Q'\n"
       "set ytics nomirror\nset y2tics\n"
       "plot 'steps.dat' using 1:4 with lines lc rgb '#b0b0b0' title 'cost', 'steps.dat' using 1:5 with lines lw 2 lc rgb '#202020' "
       "title 'running mean'";
  if (budget > 0) g << ", " << budget << " with lines dt 2 lw 2 lc rgb '#d02020' title 'budget'";
  g << ", 'steps.dat' using 1:7 axes x1y2 with steps lc rgb '#2060c0' title 'queue'\n";
  g << "unset y2label\nunset y2tics\nset ytics mirror\n";
  // The timeline: a bar per (device, plan), coloured by group, labelled with layers and share.
  g << "set output 'plan_timeline.png'\nset title 'plan timeline: layers and share of each device, colour = group'\n"
       "set ylabel 'device'\nset yrange [-0.6:" << t.devices.size() - 0.4 << "]\nset ytics (";
  for (std::size_t i = 0; i < t.devices.size(); ++i) g << (i ? ", " : "") << "'d" << t.devices[i] << "' " << i;
  g << ")\nset style fill solid 0.6 border -1\nunset key\nset palette defined (0 '#4e79a7', 1 '#f28e2b', 2 '#59a14f', 3 '#e15759', "
       "4 '#b07aa1', 5 '#76b7b2')\nunset colorbox\nset cbrange [0:5]\n"
       "plot 'timeline.dat' using (($1+$2)/2):3:(($2-$1)/2):(0.35):4 with boxxyerror fc palette, "
       "'timeline.dat' using (($1+$2)/2):3:5 with labels font ',8'\n";
  return g.str();
}

}  // namespace dynapar::report
