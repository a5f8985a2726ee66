#include "report/summary_text.hpp"

#include <cmath>
#include <cstdio>

#include "report/progress.hpp"

namespace dynapar::report {
namespace {
using nlohmann::json;

double num(const json& s, const char* key, double otherwise = 0) {
  const auto it = s.find(key);
  return it != s.end() && it->is_number() ? it->get<double>() : otherwise;
}

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}
}  // namespace

std::string human_summary(const json& s, const std::string& out_dir) {
  std::string out;
  const auto steps = static_cast<long long>(num(s, "steps"));
  out += "dynapar: " + s.value("job", std::string("job")) + " (" + s.value("model", std::string("?")) + "): " +
         std::to_string(steps) + " steps of " + std::to_string(static_cast<long long>(num(s, "batch"))) + " samples in " +
         clock_text(num(s, "wall_s")) + "\n";
  const std::string metric = s.value("test_metric", std::string("accuracy"));  // or a regression's "mse"
  out += "  test " + metric + " " + fmt("%.4f", num(s, ("final_test_" + metric).c_str()));
  if (s.contains("reference_max_rel_diff")) {
    const auto& v = s["reference_max_rel_diff"];
    const double d = v.is_number() ? v.get<double>() : INFINITY;  // "inf" or "nan": without bound
    const std::string verdict = !s.value("verified", false) ? " (OVER the tolerance)"
                                : d == 0                   ? " (verified)"
                                                           : " (verified within tolerance " + fmt("%.3g", num(s, "verify_tolerance")) + ")";
    out += "; one plain device: " + fmt("%.4f", num(s, ("reference_test_" + metric).c_str())) + ", max relative difference " +
           (v.is_string() ? v.get<std::string>() : fmt("%.3g", d)) + verdict;
  }
  out += "\n";
  out += "  " + fmt("%.1f", 1e3 * num(s, "mean_step_time_s")) + " ms a step, " + fmt("%.0f", num(s, "samples_per_s")) +
         " samples/s\n";
  out += "  plans: " + std::to_string(static_cast<int>(num(s, "replans"))) + " changes, " +
         fmt("%.1f", num(s, "bytes_migrated") / 1e6) + " MB of layers moved, " + std::to_string(static_cast<int>(num(s, "joins"))) +
         " joins, " + std::to_string(static_cast<int>(num(s, "leaves"))) + " leaves";
  if (num(s, "plans_kept") > 0) out += ", " + std::to_string(static_cast<int>(num(s, "plans_kept"))) + " changes not worth it";
  if (num(s, "plans_reverted") > 0) out += ", " + std::to_string(static_cast<int>(num(s, "plans_reverted"))) + " changes undone";
  out += "\n";
  if (s.contains("compare") && s["compare"].is_array() && !s["compare"].empty()) {
    const auto& c = s["compare"];
    // Step 0 (start-up) is not in the means (cmd_train.cpp, compare_policies).
    const int compared = c[0].value("steps", 0);
    out += "  side by side, steps " + std::string(compared > 1 ? "1" : "0") + "-" + std::to_string(compared - 1) +
           " on the same devices (" + fmt("%.1f", 1e3 * c[0].value("this_run_mean_step_time_s", 0.0)) + " ms a step here):";
    for (std::size_t i = 0; i < c.size(); ++i) {
      const double speedup = c[i].value("speedup", 0.0);
      const bool slower = speedup > 0 && speedup < 1;
      out += std::string(i ? "," : "") + " " + fmt("%.2f", slower ? 1 / speedup : speedup) + (slower ? "x slower than " : "x faster than ") +
             c[i].value("policy", std::string("?")) + " (" + fmt("%.1f", 1e3 * c[i].value("mean_step_time_s", 0.0)) + " ms" +
             (c[i].contains("avg_cost") ? ", cost " + fmt("%.4g", c[i]["avg_cost"].get<double>()) : std::string()) +
             (c[i].contains("within_budget") ? (c[i]["within_budget"].get<bool>() ? ", within the budget" : ", over the budget")
                                             : std::string()) +
             ")";
    }
    out += "\n";
  }
  if (s.contains("budget") && s["budget"].is_number()) {
    const double b = s["budget"].get<double>(), c = num(s, "avg_cost");
    out += "  cost " + fmt("%.5g", c) + " a step against the budget " + fmt("%.5g", b) + " (" + fmt("%+.1f", 100 * (c / b - 1)) +
           " %)\n";
  }
  if (num(s, "faults_injected") > 0 || num(s, "devices_lost") > 0)
    out += "  faults: " + std::to_string(static_cast<int>(num(s, "faults_injected"))) + " injected, " +
           std::to_string(static_cast<int>(num(s, "devices_lost"))) + " devices lost, " +
           std::to_string(static_cast<int>(num(s, "recoveries"))) + " recoveries (longest " + fmt("%.2f", num(s, "max_recovery_s")) +
           " s)\n";
  out += "  samples lost " + std::to_string(static_cast<long long>(num(s, "samples_lost"))) + ", applied twice " +
         std::to_string(static_cast<long long>(num(s, "samples_duplicated"))) + "\n";
  if (s.contains("final_plan_brief")) out += "  final plan " + s["final_plan_brief"].get<std::string>() + "\n";
  out += "  files: " + out_dir + "/summary.json (all figures), metrics.jsonl, plans.jsonl; plots: dynapar report " + out_dir + "\n";
  return out;
}

}  // namespace dynapar::report
