// `dynapar bench ...`: measurements recorded in docs/BENCHMARKS.md. Each prints the figure
// next to its reference from the same run.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "actors/trainer.hpp"
#include "cli_util.hpp"
#include "data/sampler.hpp"
#include "model/api.hpp"
#include "commands.hpp"
#include "planner/builtin_profiles.hpp"
#include "planner/evaluate.hpp"
#include "planner/policy.hpp"
#include "planner/synthetic.hpp"

namespace dynapar::cli {
namespace {

struct planner_bench_options {
  bool json = false;
  int instances = 200;
  int slots = 20;
  std::uint64_t seed = 1;
  std::vector<int> sizes = {16, 64, 256, 1024};
  std::string model = "resnet50";
};

// Per-slot re-plan latency (warm start from the last plan, speeds re-estimated with noise)
// and cold-start latency, on synthetic clusters.
nlohmann::json latency(const planner_bench_options& o, bool progress) {
  nlohmann::json lat = nlohmann::json::object(), cold = nlohmann::json::object(), eff = nlohmann::json::object();
  auto model = planner::builtin_profile(o.model);
  for (int n : o.sizes) {
    rng r(o.seed + static_cast<std::uint64_t>(n));
    planner::cluster_state c = planner::synthetic_cluster(n, r);
    planner::planner_config cfg;
    cfg.batch = std::max(256, 16 * n);  // 16 samples a device: enough work to spread
    auto pol = std::move(*planner::make_policy("joint_lyapunov"));
    stopwatch cold_sw;
    planner::problem p0(*model, c, cfg);
    auto first = pol->decide({p0, nullptr, {}, 0});
    const double cold_ms = 1e3 * cold_sw.seconds();
    if (!first) {
      std::cerr << "dynapar: bench planner at " << n << " devices: " << first.err().message << "\n";
      continue;
    }
    planner::plan prev = *first;
    double warm_total = 0;
    for (int s = 1; s <= o.slots; ++s) {
      planner::cluster_state cs = c;
      for (auto& d : cs.devices) d.speed *= r.uniform(0.9, 1.1);
      planner::problem p(*model, cs, cfg);
      stopwatch sw;
      auto next = pol->decide({p, &prev, {}, s});
      warm_total += sw.seconds();
      if (next) prev = *next;
    }
    planner::problem pf(*model, c, cfg);
    auto rep = planner::evaluate(pf, prev, nullptr, {});
    lat[std::to_string(n)] = 1e3 * warm_total / o.slots;
    cold[std::to_string(n)] = cold_ms;
    eff[std::to_string(n)] = rep ? rep->efficiency : 0.0;
    if (progress) std::cerr << "  " << n << " devices: warm " << 1e3 * warm_total / o.slots << " ms, cold " << cold_ms << " ms\n";
  }
  return {{"latency_ms", lat}, {"cold_latency_ms", cold}, {"efficiency", eff}};
}

// Tentative search against exhaustive enumeration on small random instances.
nlohmann::json oracle_gap(const planner_bench_options& o) {
  rng r(o.seed);
  double sum = 0, worst = 0;
  int count = 0, exact = 0;
  for (int i = 0; i < o.instances; ++i) {
    auto in = planner::random_small_instance(r, 6);
    planner::problem p(in.model, in.cluster, in.cfg);
    auto search = std::move(*planner::make_policy("joint_greedy"));
    auto oracle = std::move(*planner::make_policy("oracle"));
    auto a = search->decide({p, nullptr, {}, 0});
    auto b = oracle->decide({p, nullptr, {}, 0});
    if (!a || !b) continue;  // infeasible for both (the oracle finds a plan whenever one exists)
    const double ta = planner::evaluate(p, *a, nullptr, {})->batch_time_s;
    const double tb = planner::evaluate(p, *b, nullptr, {})->batch_time_s;
    const double gap = std::max(0.0, (ta - tb) / tb);
    sum += gap;
    worst = std::max(worst, gap);
    exact += gap < 1e-9;
    ++count;
  }
  return {{"mean", count ? sum / count : 0.0}, {"max", worst}, {"instances", count}, {"exact", exact}};
}

int bench_planner(const planner_bench_options& o) {
  nlohmann::json out = latency(o, !o.json);
  out["oracle_gap"] = oracle_gap(o);
  out["model"] = o.model;
  out["slots"] = o.slots;
  if (o.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << std::setprecision(4) << "planner latency per slot (warm start), " << o.model << ":\n";
    for (auto& [n, ms] : out["latency_ms"].items())
      std::cout << "  " << std::setw(5) << n << " devices: " << ms.get<double>() << " ms (cold "
                << out["cold_latency_ms"][n].get<double>() << " ms, efficiency " << out["efficiency"][n].get<double>() << ")\n";
    const auto& g = out["oracle_gap"];
    std::cout << "oracle gap over " << g["instances"] << " instances: mean " << 100 * g["mean"].get<double>() << " %, max "
              << 100 * g["max"].get<double>() << " %, exact in " << g["exact"] << "\n";
  }
  return exit_ok;
}

struct train_bench_options {
  std::string model = "cnn";
  std::string place = "cpu";
  int batch = 64, steps = 60, micro_batches = 8;
  bool json = false;
};

// Steps per second of the plain loop against the actor runtime on one device, same model,
// batch, samples and micro-batching, interleaved in rounds so that machine noise hits both.
int bench_train(const train_bench_options& o) {
  model::set_threads(1);
  if (auto st = model::check_place(o.place); !st) return report(st.err());
  const auto d = data::synthetic(std::max(2000, o.batch * 4), 1);
  auto m = model::make_model(o.model, 1);
  if (!m) return report(m.err());
  const model::optimizer_config opt{"sgd", 0.01, 0.9, 0};
  auto plain = [&](int micro) {
    model::reference ref(**m, opt, o.place);
    data::global_sampler s(d.size(), o.batch, 1);
    ref.step(d, s.step_samples(0), micro);  // warm-up
    stopwatch sw;
    for (int t = 1; t <= o.steps; ++t) ref.step(d, s.step_samples(t), micro);
    return sw.seconds() / o.steps;
  };
  auto actor = [&](int micro) -> result<double> {
    training::train_settings s;
    s.plan.groups.push_back({{0}, {0, model::num_layers(**m)}, o.batch, micro > 0 ? micro : o.batch});
    s.steps = o.steps + 1;
    s.batch = o.batch;
    s.optimizer = opt;
    s.hash_every = 0;
    if (o.place != "cpu") s.places[0] = o.place;
    std::vector<double> times;
    training::train_callbacks cb;
    cb.on_step = [&](const training::step_record& rec) {
      if (rec.step > 0) times.push_back(rec.time_s);  // step 0 warms up
    };
    auto r = actors::train(**m, d, s, cb);
    if (!r) return r.err();
    double sum = 0;
    for (double t : times) sum += t;
    return sum / static_cast<double>(times.size());
  };
  const int u = std::max(1, o.batch / o.micro_batches);
  double p1 = 0, a1 = 0, pm = 0, am = 0;
  const int rounds = 3;
  for (int r = 0; r < rounds; ++r) {
    p1 += plain(0) / rounds;
    auto x = actor(0);
    if (!x) return report(x.err());
    a1 += *x / rounds;
    pm += plain(u) / rounds;
    auto y = actor(u);
    if (!y) return report(y.err());
    am += *y / rounds;
  }
  const int mbs = (o.batch + u - 1) / u;
  nlohmann::json out = {{"model", o.model},
                        {"place", o.place},
                        {"batch", o.batch},
                        {"steps", o.steps},
                        {"plain_step_s", p1},
                        {"actor_step_s", a1},
                        {"throughput_ratio", p1 / a1},
                        {"micro_batches", mbs},
                        {"plain_micro_step_s", pm},
                        {"actor_micro_step_s", am},
                        {"throughput_ratio_micro", pm / am},
                        {"overhead_per_micro_batch_us", 1e6 * (am - pm) / mbs}};
  if (o.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << std::setprecision(4) << o.model << " on " << o.place << ", batch " << o.batch << ", " << o.steps << " steps x " << rounds
              << " rounds, 1 device, 1 group:\n"
              << "  plain LibTorch loop " << 1e3 * p1 << " ms/step, actors " << 1e3 * a1 << " ms/step: throughput ratio "
              << p1 / a1 << "\n"
              << "  with " << mbs << " micro-batches: plain " << 1e3 * pm << " ms/step, actors " << 1e3 * am
              << " ms/step: ratio " << pm / am << ", actor overhead " << 1e6 * (am - pm) / mbs << " us per micro-batch\n";
  }
  return exit_ok;
}

}  // namespace

void add_bench(CLI::App& app, runner& run) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (docs/BENCHMARKS.md)");
  bench->require_subcommand(1);
  auto o = std::make_shared<planner_bench_options>();
  auto* pl = bench->add_subcommand("planner", "Planner latency by cluster size and gap to the exhaustive oracle");
  pl->add_flag("--json", o->json, "Print one JSON object");
  pl->add_option("--instances", o->instances, "Random instances for the oracle gap")->check(CLI::Range(1, 100000));
  pl->add_option("--slots", o->slots, "Warm re-plans averaged per size")->check(CLI::Range(1, 1000));
  pl->add_option("--seed", o->seed, "Seed");
  pl->add_option("--sizes", o->sizes, "Cluster sizes")->check(CLI::Range(1, 100000));
  pl->add_option("--model", o->model, "Built-in profile")->check(CLI::IsMember(planner::builtin_profile_names()));
  pl->callback([o, &run] { run = [o] { return bench_planner(*o); }; });
  auto t = std::make_shared<train_bench_options>();
  auto* tr = bench->add_subcommand("train", "The actor runtime against a plain LibTorch loop on one device");
  tr->add_option("--model", t->model, "Built-in model")->check(CLI::IsMember(model::builtin_model_names()));
  tr->add_option("--batch", t->batch, "Batch")->check(CLI::Range(1, 4096));
  tr->add_option("--steps", t->steps, "Timed steps per round")->check(CLI::Range(1, 100000));
  tr->add_option("--micro-batches", t->micro_batches, "Micro-batches for the overhead measurement")->check(CLI::Range(1, 4096));
  tr->add_option("--place", t->place, "Where both compute: cpu or cuda:N (default cpu; docs/GPU.md)");
  tr->add_flag("--json", t->json, "Print one JSON object");
  tr->callback([t, &run] { run = [t] { return bench_train(*t); }; });
  add_bench_runtime(*bench, run);
  add_bench_wire(*bench, run);
  add_bench_sum(*bench, run);
  add_bench_optimizer(*bench, run);
  add_bench_control(*bench, run);
  add_bench_data(*bench, run);
}

}  // namespace dynapar::cli
