// `dynapar bench sum`: the cross-group gradient sum between processes, three ways, in one run:
//  - dynapar's decentralised exact sum: the processes reduce-scatter and all-gather among
//    themselves over ZeroMQ, each owner adding its chunk in the exact sum's tree
//    (model::tree_all_reduce); the same bits as one device;
//  - dynapar's central exact sum: every holder sends its gradient to the controller over
//    ZeroMQ (tensor frames), the controller adds them in the tree and sends the sum back;
//  - LibTorch's c10d Gloo ring all-reduce among the same processes (not exact: its order
//    depends on the ring).
// Worker processes are this binary (`bench sum-worker`); each size and backend gets fresh ones.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/remote/frames.hpp"
#include "cli_util.hpp"
#include "launch/processes.hpp"
#include "commands.hpp"
#include "comm/nccl_sum.hpp"
#include "model/channel.hpp"
#include "model/collective.hpp"

namespace dynapar::cli {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

struct sum_options {
  int procs = 3;
  std::vector<double> sizes_kib = {64, 1664, 16384};  // 1664 KiB: the CNN's gradients
  int iters = 30;
  bool json = false;
};

struct worker_options {
  std::string backend, store, endpoint, out;
  int rank = 0, world = 1, iters = 30;
  std::size_t bytes = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The ZeroMQ side of a worker: send the gradient, wait for the sum, time the round.
result<std::vector<double>> zmq_rounds(const worker_options& o) {
  zmq::context_t ctx{1};
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::routing_id, "rank-" + std::to_string(o.rank));
  s.set(zmq::sockopt::linger, 0);
  s.connect(o.endpoint);
  const auto g = model::filled_tensor(static_cast<std::int64_t>(o.bytes / 4), static_cast<float>(o.rank + 1));
  // As a holder sends its chunk's owner a partial sum.
  const auto c = actors::remote::call_to(o.rank, wire::ops::reduce_part{0, 0, false, o.rank, {{0, o.rank}}, o.rank});
  std::vector<double> times;
  for (int i = 0; i < o.iters + 3; ++i) {
    const auto t0 = clock::now();
    if (auto st = comm::send_packet(s, actors::remote::pack(c, {g}), false); !st) return st.err();
    auto p = comm::recv_packet(s, false, std::chrono::milliseconds(30000));
    if (!p) return p.err();
    if (!*p) return make_error("bench", "no sum within 30 s");
    auto u = actors::remote::unpack(**p);
    if (!u || u->tensors.size() != 1 || model::bytes(u->tensors[0]) != o.bytes) return make_error("bench", "a wrong sum came back");
    if (i >= 3) times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  return times;
}

// Publishes this rank's endpoint as a file in the store folder and waits for every rank's.
result<std::vector<std::string>> exchange_by_files(const worker_options& o, const std::string& mine) {
  const fs::path dir = o.store;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const auto tmp = dir / ("." + std::to_string(o.rank));
  std::ofstream(tmp) << mine << "\n";
  fs::rename(tmp, dir / std::to_string(o.rank), ec);
  if (ec) return make_error("bench", "publishing the endpoint: " + ec.message());
  std::vector<std::string> all(static_cast<std::size_t>(o.world));
  const auto deadline = clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < o.world; ++r) {
    while (!(std::ifstream(dir / std::to_string(r)) >> all[static_cast<std::size_t>(r)])) {
      if (clock::now() > deadline) return make_error("bench", "rank " + std::to_string(r) + " published no endpoint within 30 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return all;
}

// The decentralised exact sum: one round is tree_all_reduce with the ranks as the leaves.
result<std::vector<double>> tree_rounds(const worker_options& o) {
  auto c = model::make_zmq_channel(o.rank, o.world, "tcp://127.0.0.1:0",
                                   [&](const std::string& mine) { return exchange_by_files(o, mine); });
  if (!c) return c.err();
  const auto n = static_cast<std::int64_t>(o.bytes / 4);
  const auto g = model::filled_tensor(n, static_cast<float>(o.rank + 1));
  auto out = model::filled_tensor(n, 0.f);
  std::vector<double> times;
  for (int i = 0; i < o.iters + 3; ++i) {
    const auto t0 = clock::now();
    if (auto st = model::tree_all_reduce(**c, {model::grad_part{0, o.rank, {g}}}, o.world, out); !st) return st.err();
    if (i >= 3) times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  // Every element is 1 + 2 + ... + world (small integers: exact in any order).
  const auto v = model::values_of(out);
  if (v.empty() || v.front() != static_cast<float>(o.world * (o.world + 1) / 2) || v.back() != v.front())
    return make_error("bench", "the decentralised sum came out wrong");
  return times;
}

int worker_main(const worker_options& o) {
  model::set_threads(1);
  auto times = o.backend == "gloo"   ? model::gloo_allreduce_times(o.store, o.rank, o.world, o.bytes / 4, o.iters)
               : o.backend == "tree" ? tree_rounds(o)
                                     : zmq_rounds(o);
  if (!times) return report(times.err());
  if (o.rank == 0) std::ofstream(o.out) << median(*times) << "\n";
  return exit_ok;
}

pid_t spawn_worker(const worker_options& o) {
  return launch::spawn_self({"dynapar", "bench", "sum-worker", "--backend", o.backend, "--rank", std::to_string(o.rank),
                                   "--world", std::to_string(o.world), "--bytes", std::to_string(o.bytes), "--iters",
                                   std::to_string(o.iters), "--store", o.store, "--endpoint", o.endpoint, "--out", o.out});
}

bool wait_all(const std::vector<pid_t>& pids) {
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return ok;
}

// The controller's side of dynapar's sum: gather one gradient per rank, add them in the exact
// sum's tree (ranks as its leaves), send the sum to each.
status central_sums(zmq::socket_t& router, int world, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::pair<std::string, model::tensor>> got;
    while (static_cast<int>(got.size()) < world) {
      auto p = comm::recv_packet(router, true, std::chrono::milliseconds(60000));
      if (!p) return p.err();
      if (!*p) return make_error("bench", "a worker sent nothing for 60 s");
      auto u = actors::remote::unpack(**p);
      if (!u || u->tensors.size() != 1) return make_error("bench", "a malformed gradient");
      got.emplace_back((*p)->route, u->tensors[0]);
    }
    std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<model::grad_part> parts;
    for (const auto& [route, t] : got) parts.push_back({0, static_cast<std::int64_t>(parts.size()), {t}});
    auto sum = model::tree_sum(std::move(parts), world);
    if (!sum) return sum.err();
    const auto c = actors::remote::call_to(0, wire::ops::apply{0, 0, 1.0});
    for (const auto& [route, t] : got) {
      auto p = actors::remote::pack(c, *sum);
      p.route = route;
      if (auto st = comm::send_packet(router, std::move(p), true); !st) return st;
    }
  }
  return ok_status();
}

result<double> run_backend(const sum_options& o, const std::string& backend, std::size_t bytes, const fs::path& dir) {
  worker_options w;
  w.backend = backend;
  w.world = o.procs;
  w.bytes = bytes;
  w.iters = o.iters;
  w.out = (dir / "median").string();
  w.store = (dir / ("store-" + backend + std::to_string(bytes))).string();
  zmq::context_t ctx{1};
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  if (backend == "zmq") {
    router.bind("tcp://127.0.0.1:0");
    w.endpoint = router.get(zmq::sockopt::last_endpoint);
  } else {
    w.endpoint = "tcp://127.0.0.1:1";
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < o.procs; ++r) {
    w.rank = r;
    pids.push_back(spawn_worker(w));
  }
  status served = ok_status();
  if (backend == "zmq") served = central_sums(router, o.procs, o.iters + 3);
  const bool ok = wait_all(pids);
  if (!served) return served.err();
  if (!ok) return make_error("bench", backend + " workers failed");
  double v = 0;
  std::ifstream(w.out) >> v;
  if (v <= 0) return make_error("bench", backend + ": no timing");
  return v;
}

int sum_main(const sum_options& o) {
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path() / ("dynapar-bench-sum-" + std::to_string(::getpid()));
  fs::create_directories(dir, ec);
  if (!o.json)
    std::cout << "processes: " << o.procs << ", " << o.iters << " rounds each (median)\n"
              << std::left << std::setw(12) << "gradient" << std::setw(18) << "exact tree (ms)" << std::setw(21)
              << "exact central (ms)" << std::setw(16) << "Gloo ring (ms)" << std::setw(14) << "tree / Gloo" << "central / Gloo\n";
  nlohmann::json rows = nlohmann::json::array();
  for (double kib : o.sizes_kib) {
    const auto bytes = static_cast<std::size_t>(kib * 1024) / 4 * 4;
    auto t = run_backend(o, "tree", bytes, dir);
    if (!t) return report(t.err());
    auto z = run_backend(o, "zmq", bytes, dir);
    if (!z) return report(z.err());
    auto g = run_backend(o, "gloo", bytes, dir);
    if (!g) return report(g.err());
    rows.push_back({{"bytes", bytes}, {"exact_ms", *t * 1e3}, {"central_ms", *z * 1e3}, {"gloo_ms", *g * 1e3}});
    if (!o.json)
      std::cout << std::left << std::setw(12) << (std::to_string(static_cast<int>(kib)) + " KiB") << std::setprecision(3)
                << std::setw(18) << *t * 1e3 << std::setw(21) << *z * 1e3 << std::setw(16) << *g * 1e3 << std::setw(14) << *t / *g
                << *z / *g << "\n";
  }
  if (o.json) std::cout << nlohmann::json{{"processes", o.procs}, {"rows", rows}}.dump() << "\n";
  fs::remove_all(dir, ec);
  return exit_ok;
}

// NCCL across this machine's GPUs: the GPU counterpart of the sums above.
int nccl_main(double mib, int iters) {
  const auto floats = static_cast<std::size_t>(mib * 1048576 / 4);
  auto t = comm::nccl_allreduce_times(floats, iters);
  if (!t) return report(t.err());
  const double s = median(t->seconds), bytes = static_cast<double>(floats) * 4;
  // NCCL's "bus bandwidth": what each GPU's link carried for a ring all-reduce.
  const double bus = t->gpus > 1 ? bytes * 2 * (t->gpus - 1) / t->gpus / s / 1e9 : 0;
  std::cout << "NCCL all-reduce of " << mib << " MiB on " << t->gpus << " GPU(s): median " << s * 1e3 << " ms, bus "
            << bus << " GB/s (" << iters << " rounds)\n";
  return exit_ok;
}

}  // namespace

void add_bench_sum(CLI::App& bench, runner& run) {
  auto o = std::make_shared<sum_options>();
  auto* sub = bench.add_subcommand("sum", "Gradient sums between processes: dynapar's exact sums (decentralised and central) against Gloo's ring all-reduce");
  sub->add_option("--procs", o->procs, "Processes (default 3)")->check(CLI::Range(2, 16));
  sub->add_option("--sizes-kib", o->sizes_kib, "Gradient sizes in KiB (default 64,1664,16384)")->delimiter(',')->check(CLI::Range(1.0, 1048576.0));
  sub->add_option("--iters", o->iters, "Timed rounds per size and backend (default 30)")->check(CLI::Range(1, 10000));
  sub->add_flag("--json", o->json, "One JSON object: {processes, rows: [{bytes, exact_ms, central_ms, gloo_ms}]}");
  sub->callback([o, &run] { run = [o] { return sum_main(*o); }; });

  auto n = std::make_shared<std::pair<double, int>>(64.0, 20);
  auto* nc = bench.add_subcommand("nccl", "All-reduce with NCCL across this machine's GPUs (builds with NCCL only)");
  nc->add_option("--mib", n->first, "Buffer size in MiB (default 64)")->check(CLI::Range(0.001, 65536.0));
  nc->add_option("--iters", n->second, "Timed rounds (default 20)")->check(CLI::Range(1, 10000));
  nc->callback([n, &run] { run = [n] { return nccl_main(n->first, n->second); }; });

  auto w = std::make_shared<worker_options>();
  auto* worker = bench.add_subcommand("sum-worker", "");  // internal: one process of `bench sum`
  worker->group("");
  worker->add_option("--backend", w->backend)->required()->check(CLI::IsMember({"zmq", "gloo", "tree"}));
  worker->add_option("--rank", w->rank)->required();
  worker->add_option("--world", w->world)->required();
  worker->add_option("--bytes", w->bytes)->required();
  worker->add_option("--iters", w->iters)->required();
  worker->add_option("--store", w->store)->required();
  worker->add_option("--endpoint", w->endpoint)->required();
  worker->add_option("--out", w->out)->required();
  worker->callback([w, &run] { run = [w] { return worker_main(*w); }; });
}

}  // namespace dynapar::cli
