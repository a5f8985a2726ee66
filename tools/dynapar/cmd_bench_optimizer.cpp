// `dynapar bench optimizer`: one Adam step over a model's parameters, as dynapar's devices
// step (Adam in one pass, model/fused_adam.hpp) against LibTorch's Adam on the same summed
// gradients, in one run. The step every data-parallel replica pays. (SGD is LibTorch's own
// on both sides, so there is nothing to compare.)
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "model/api.hpp"

namespace dynapar::cli {
namespace {

struct optimizer_bench_options {
  std::string model = "resnet18";
  std::string place = "cpu";
  int repeat = 15;
  bool json = false;
};

int bench_optimizer(const optimizer_bench_options& o) {
  model::set_threads(1);
  auto m = model::make_model(o.model, 1);
  if (!m) return report(m.err());
  auto t = model::time_adam(**m, o.repeat, o.place);
  if (!t) return report(t.err());
  nlohmann::json out = {{"model", o.model},         {"optimizer", "adam"},          {"place", o.place},
                        {"parameters", t->parameters}, {"dynapar_ms", 1e3 * t->dynapar_s}, {"libtorch_ms", 1e3 * t->libtorch_s},
                        {"speedup", t->libtorch_s / t->dynapar_s}};
  if (o.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << std::setprecision(4) << "adam step on " << o.model << " (" << t->parameters << " parameters, " << o.place
              << ", 1 thread, median of " << o.repeat << "): dynapar " << 1e3 * t->dynapar_s << " ms, LibTorch " << 1e3 * t->libtorch_s
              << " ms, " << t->libtorch_s / t->dynapar_s << "x\n";
  }
  return exit_ok;
}

}  // namespace

void add_bench_optimizer(CLI::App& bench, runner& run) {
  auto o = std::make_shared<optimizer_bench_options>();
  auto* sub = bench.add_subcommand("optimizer", "One Adam step over a model's parameters: dynapar's against LibTorch's");
  sub->add_option("--model", o->model, "Built-in model (default resnet18)")->check(CLI::IsMember(model::builtin_model_names()));
  sub->add_option("--repeat", o->repeat, "Timed steps of each (default 15)")->check(CLI::Range(1, 1000));
  sub->add_option("--place", o->place, "cpu or cuda:N (default cpu)");
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([o, &run] { run = [o] { return bench_optimizer(*o); }; });
}

}  // namespace dynapar::cli
