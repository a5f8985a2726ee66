// What a person sees of a run: the status line's figures against hand computations, the
// closing summary's length and arithmetic, and the report's tables from hand-made records.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/progress.hpp"
#include "report/run_report.hpp"
#include "report/summary_text.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

TEST_CASE("the status line: rate, loss and ETA from the recent steps") {
  report::progress_config c;
  c.smoothing = 0.5;
  c.plain_every_s = 100;
  c.plain_every_pct = 50;
  report::progress_meter m(10, 64, c);
  CHECK_FALSE(m.eta_s());
  m.step(0, 0.2, 2.0, 0.2);
  CHECK(m.plain_due());  // the first step
  m.step(1, 0.4, 1.0, 0.6);
  CHECK_FALSE(m.plain_due());
  // Means: step time 0.5*0.2 + 0.5*0.4 = 0.3 s, loss 1.5; 8 steps left.
  REQUIRE(m.eta_s());
  CHECK(*m.eta_s() == Approx(8 * 0.3));
  CHECK(m.samples_per_s() == Approx(64 / 0.3));
  m.plan("[0]:40 [1>2]:24");
  m.fault();
  const auto line = m.line();
  CHECK(line.find("step 2/10") == 0);
  CHECK(line.find("213 samples/s") != std::string::npos);
  CHECK(line.find("loss 1.5000") != std::string::npos);
  CHECK(line.find("ETA 0:02") != std::string::npos);
  CHECK(line.find("faults 1") != std::string::npos);
  CHECK(line.find("plan [0]:40 [1>2]:24") != std::string::npos);
  m.step(2, 0.3, 1.0, 0.9);
  m.step(3, 0.3, 1.0, 1.2);
  CHECK_FALSE(m.plain_due());
  m.step(4, 0.3, 1.0, 1.5);  // 50 % of the run since the first plain line... at step 5 - 1 = 4 steps: not yet
  CHECK_FALSE(m.plain_due());
  m.step(5, 0.3, 1.0, 1.8);  // 5 steps since: due
  CHECK(m.plain_due());
  m.step(6, 0.3, 1.0, 250);  // the time limit
  CHECK(m.plain_due());
  m.step(9, 0.3, 1.0, 251);  // the last step
  CHECK(m.plain_due());
  CHECK(*m.eta_s() == 0);
  CHECK(report::clock_text(3723) == "1:02:03");
  CHECK(report::clock_text(65.4) == "1:05");
}

TEST_CASE("the closing summary: a dozen lines at most, the budget's margin worked out") {
  nlohmann::json s = {{"job", "demo"}, {"model", "mlp"}, {"steps", 500}, {"batch", 120}, {"wall_s", 125.0},
                      {"final_test_accuracy", 0.9046}, {"mean_step_time_s", 0.119}, {"samples_per_s", 1008.4}, {"replans", 4},
                      {"bytes_migrated", 10.1e6}, {"joins", 2}, {"leaves", 2}, {"budget", 0.0125}, {"avg_cost", 0.01303},
                      {"faults_injected", 3}, {"devices_lost", 2}, {"recoveries", 2}, {"max_recovery_s", 0.08},
                      {"samples_lost", 0}, {"samples_duplicated", 0}, {"reference_max_rel_diff", 0.0},
                      {"reference_test_accuracy", 0.9046}, {"verified", true}};
  s["compare"] = {{{"policy", "dp_even"}, {"steps", 100}, {"mean_step_time_s", 0.15}, {"this_run_mean_step_time_s", 0.1},
                   {"speedup", 1.5}},
                  {{"policy", "dp_balanced"}, {"steps", 100}, {"mean_step_time_s", 0.12}, {"this_run_mean_step_time_s", 0.1},
                   {"speedup", 1.2}, {"avg_cost", 0.031}, {"within_budget", false}},
                  {{"policy", "hetpipe_static"}, {"steps", 100}, {"mean_step_time_s", 0.08}, {"this_run_mean_step_time_s", 0.1},
                   {"speedup", 0.8}, {"avg_cost", 0.0101}, {"within_budget", true}}};
  const auto text = report::human_summary(s, "out/x");
  int lines = 0;
  for (char ch : text) lines += ch == '\n';
  CHECK(lines <= 12);
  CHECK(text.find("500 steps of 120 samples in 2:05") != std::string::npos);
  CHECK(text.find("max relative difference 0 (verified)") != std::string::npos);
  CHECK(text.find("(+4.2 %)") != std::string::npos);  // 0.01303 / 0.0125 - 1
  CHECK(text.find("119.0 ms a step") != std::string::npos);
  CHECK(text.find("3 injected, 2 devices lost") != std::string::npos);
  // Step 0 (start-up) is left out of the compared means; a slower run says "slower" (0.1 / 0.08).
  CHECK(text.find("steps 1-99 on the same devices (100.0 ms a step here): 1.50x faster than dp_even (150.0 ms), "
                  "1.20x faster than dp_balanced (120.0 ms, cost 0.031, over the budget), 1.25x slower than hetpipe_static "
                  "(80.0 ms, cost 0.0101, within the budget)") !=
        std::string::npos);
  s.erase("reference_max_rel_diff");
  s.erase("faults_injected");
  s.erase("devices_lost");
  s["budget"] = nullptr;
  for (auto& e : s["compare"]) e.erase("within_budget");  // none without a budget (cmd_train.cpp)
  const auto plain = report::human_summary(s, "out/x");
  CHECK(plain.find("one plain device") == std::string::npos);
  CHECK(plain.find("budget") == std::string::npos);
  CHECK(plain.find("faults") == std::string::npos);
}

namespace {
fs::path scratch(const std::string& name) {
  auto d = fs::temp_directory_path() / ("dynapar_report_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
const char* two_plans =
    R"({"step":0,"plan":{"groups":[{"devices":[0],"splits":[0,4],"share":64}]},"predicted_step_s":0.1,"joined":[0],"left":[]})"
    "\n"
    R"({"step":2,"plan":{"groups":[{"devices":[0],"splits":[0,4],"share":40},{"devices":[2,1],"splits":[0,1,4],"share":24}]},)"
    R"("predicted_step_s":0.05,"joined":[1,2],"left":[]})"
    "\n";
}  // namespace

TEST_CASE("report tables from hand-made records") {
  const auto d = scratch("tables");
  write(d / "plans.jsonl", two_plans);
  write(d / "metrics.jsonl",
        R"({"step":0,"loss":2.0,"time_s":0.1,"cost":1.0,"predicted_s":0.1,"cost_queue":0})"
        "\n"
        R"({"step":1,"loss":1.5,"time_s":0.2,"cost":3.0,"predicted_s":0.1,"cost_queue":0.5})"
        "\n"
        R"({"event":"injected","step":2,"kind":"kill","device":1,"source":"plan","detail":"","seconds":0})"
        "\n"
        R"({"step":2,"loss":1.0,"time_s":0.05,"cost":2.0})"
        "\n");
  auto r = report::load_run(d.string());
  REQUIRE(r);
  CHECK(r->steps.size() == 3);
  CHECK(r->events.size() == 1);
  CHECK(r->summary.is_null());  // still running
  const auto t = report::make_tables(*r);
  CHECK(t.devices == std::vector<int>{0, 1, 2});
  // Running mean cost: 1, 2, 2; times in ms; a step without a prediction gives 0.
  CHECK(t.steps == "0 100 2 1 1 100 0\n1 200 1.5 3 2 100 0.5\n2 50 1 2 2 0 0\n");
  CHECK(t.marks == "2 1 plan\n2 2 join:d1\n2 2 join:d2\n2 4 injected:kill:d1\n");
  // Plan 1 covers steps [0, 2), plan 2 [2, 3): rows are device positions 0, 1, 2.
  CHECK(t.timeline == "0 2 0 0 L0-3_b64\n2 3 0 0 L0-3_b40\n2 3 2 1 L0-0_b24\n2 3 1 1 L1-3_b24\n");
  const auto script = report::gnuplot_script(t, 1.5);
  for (const char* png : report::plot_files) CHECK(script.find(std::string("set output '") + png + "'") != std::string::npos);
  CHECK(script.find("1.5 with lines") != std::string::npos);  // the budget line
}

namespace {
// The message loading `dir` fails with ("" when it loads).
std::string load_error(const fs::path& dir) {
  auto r = report::load_run(dir.string());
  return r ? "" : r.err().message;
}
bool says(const std::string& message, const char* what) { return message.find(what) != std::string::npos; }
}  // namespace

TEST_CASE("report input errors name the file and line") {
  const auto d = scratch("errors");
  CHECK(says(load_error(d / "nope"), "not a directory"));
  CHECK(says(load_error(d), "metrics.jsonl is missing"));
  write(d / "metrics.jsonl", "{\"step\":0,\"loss\":1,\"time_s\":0.1}\n{oops\n{\"step\":1,\"loss\":1,\"time_s\":0.1}\n");
  write(d / "plans.jsonl", two_plans);
  CHECK(says(load_error(d), "metrics.jsonl line 2"));
  // A last line cut short (a run still writing) is not an error.
  write(d / "metrics.jsonl", "{\"step\":0,\"loss\":1,\"time_s\":0.1}\n{\"step\":1,\"lo");
  auto r = report::load_run(d.string());
  REQUIRE(r);
  CHECK(r->steps.size() == 1);
  // A record without a field it needs; a plans file with no plan.
  write(d / "plans.jsonl", "{\"step\":0}\n");
  CHECK(says(load_error(d), "plans.jsonl record 1"));
  write(d / "plans.jsonl", "");
  CHECK(says(load_error(d), "holds no plan"));
}
