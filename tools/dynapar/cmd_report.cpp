// `dynapar report OUT_DIR`: PNG plots of a training run (runtime/report/run_report.hpp makes
// the tables; gnuplot draws them). Works on a finished run or one still going.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli_util.hpp"
#include "commands.hpp"
#include "report/run_report.hpp"

namespace dynapar::cli {
namespace {
namespace fs = std::filesystem;

// PNG files start with these 8 bytes.
bool is_png(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  char head[8] = {};
  f.read(head, 8);
  return f && std::string(head, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

int report_main(const std::string& run_dir, std::string out) {
  auto r = report::load_run(run_dir);
  if (!r) return cli::report(r.err());
  if (out.empty()) out = (fs::path(run_dir) / "plots").string();
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return cli::report(make_error("io", "cannot create '" + out + "': " + ec.message()));
  const auto t = report::make_tables(*r);
  const double budget = r->summary.is_object() && r->summary.value("budget", nlohmann::json()).is_number()
                            ? r->summary["budget"].get<double>()
                            : 0.0;
  const fs::path dir(out);
  std::ofstream(dir / "steps.dat") << t.steps;
  std::ofstream(dir / "marks.dat") << t.marks;
  std::ofstream(dir / "timeline.dat") << t.timeline;
  std::ofstream(dir / "report.gp") << report::gnuplot_script(t, budget);
  for (const char* png : report::plot_files) fs::remove(dir / png, ec);
  const int rc = cli::run_gnuplot(dir.string(), "report.gp", "gnuplot.log");
  if (rc == 127)
    return cli::report(make_error("missing_tool", "gnuplot not found (tools/bootstrap.sh installs gnuplot-nox); the tables are in " + out));
  for (const char* png : report::plot_files)
    if (rc != 0 || !is_png(dir / png))
      return cli::report(make_error("plot_failed", "gnuplot did not draw " + (dir / png).string() + ": see " +
                                                       (dir / "gnuplot.log").string() + " and " + (dir / "report.gp").string()));
  std::cout << "dynapar report: " << r->steps.size() << " steps, " << r->plans.size() << " plans, " << r->events.size()
            << " fault events; plots in " << out << ":";
  for (const char* png : report::plot_files) std::cout << " " << png;
  std::cout << "\n";
  return exit_ok;
}
}  // namespace

void add_report(CLI::App& app, runner& run) {
  auto o = std::make_shared<std::pair<std::string, std::string>>();
  auto* sub = app.add_subcommand("report", "PNG plots of a training run's output directory (step time, plan timeline, cost, prediction)");
  sub->add_option("run_dir", o->first, "A run's --out directory (metrics.jsonl, plans.jsonl, summary.json)")->required();
  sub->add_option("--out", o->second, "Where the plots go (default RUN_DIR/plots)");
  sub->callback([o, &run] { run = [o] { return report_main(o->first, o->second); }; });
}

}  // namespace dynapar::cli
