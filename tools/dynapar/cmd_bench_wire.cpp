// `dynapar bench wire`: the tensor path between processes (a Cap'n Proto header and the
// tensor as its own zero-copy frame, decoded into a tensor on arrival) against raw ZeroMQ
// over the same TCP loopback socket pair with messages of the same size. Sender and receiver
// are threads of this process on a DEALER -> ROUTER pair, as a node talks to the controller.
// With --curve, the same dynapar path also runs over CURVE (docs/SECURITY.md): the cost of
// authenticated encryption, as a ratio to plain in the same run.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/remote/frames.hpp"
#include "cli_util.hpp"
#include "comm/curve.hpp"
#include "commands.hpp"

namespace dynapar::cli {
namespace {

using clock = std::chrono::steady_clock;

struct wire_options {
  std::vector<double> sizes_kib = {16, 256, 1024, 4096};
  double mib_per_run = 256;
  int rounds = 5;
  bool json = false;
  bool curve = false;
};

// Throwaway keys for --curve: the receiver serves, the sender is an admitted node.
struct curve_keys {
  comm::server_keys server;
  comm::client_keys client;
};

// Seconds to move `count` messages made by `make` (built once, sent `count` times) from a
// DEALER to a ROUTER over TCP loopback, the receiver turning each back into its payload.
template <class Send, class Receive>
double run_once(int count, Send send, Receive receive, const curve_keys* curve = nullptr) {
  zmq::context_t ctx{1};
  std::unique_ptr<comm::authenticator> auth;
  zmq::socket_t router(ctx, zmq::socket_type::router), dealer(ctx, zmq::socket_type::dealer);
  if (curve) {
    if (auto a = comm::authenticator::start(ctx, curve->server.authorized)) auth = std::move(*a);
    (void)comm::make_curve_server(router, curve->server);
    (void)comm::make_curve_client(dealer, curve->client);
  }
  for (auto* s : {&router, &dealer}) {
    s->set(zmq::sockopt::sndhwm, 64);
    s->set(zmq::sockopt::rcvhwm, 64);
    s->set(zmq::sockopt::linger, 0);
  }
  router.bind("tcp://127.0.0.1:0");
  dealer.set(zmq::sockopt::routing_id, "sender");
  dealer.connect(router.get(zmq::sockopt::last_endpoint));
  // One message first, so that the connection is up before the clock starts.
  send(dealer);
  receive(router);
  const auto t0 = clock::now();
  std::thread tx([&] {
    for (int i = 0; i < count; ++i) send(dealer);
  });
  for (int i = 0; i < count; ++i) receive(router);
  const double s = std::chrono::duration<double>(clock::now() - t0).count();
  tx.join();
  return s;
}

int wire_main(const wire_options& o) {
  model::set_threads(1);
  std::optional<curve_keys> keys;
  if (o.curve) {
    auto server = comm::make_key_pair("controller", comm::key_role::controller);
    auto client = comm::make_key_pair("node", comm::key_role::node);
    if (!server) return report(server.err());
    if (!client) return report(client.err());
    keys = curve_keys{{*server, {client->pub}, ""}, {*client, server->pub.key}};
  }
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json)
    std::cout << std::left << std::setw(10) << "size" << std::setw(10) << "messages" << std::setw(14) << "raw GB/s"
              << std::setw(16) << "dynapar GB/s" << std::setw(16) << "dynapar / raw"
              << (o.curve ? "CURVE GB/s    CURVE / dynapar" : "") << "\n";
  for (double kib : o.sizes_kib) {
    const auto bytes = static_cast<std::size_t>(kib * 1024);
    const int count = std::max(8, static_cast<int>(o.mib_per_run * 1048576.0 / static_cast<double>(bytes)));
    std::vector<char> raw_buf(bytes, 1);
    // A float32 activation of that size, as a device sends it.
    const auto t = model::filled_tensor(static_cast<std::int64_t>(bytes / 4), 1.0f);
    const auto call = actors::remote::call_to(1, wire::ops::activation{0, 0, 0});
    std::vector<double> raw_s, ours_s, curve_s;
    std::size_t bad = 0;
    for (int r = 0; r < o.rounds; ++r) {  // alternating, so that drift in the machine hits both
      raw_s.push_back(run_once(
          count, [&](zmq::socket_t& s) { s.send(zmq::buffer(raw_buf), zmq::send_flags::none); },
          [&](zmq::socket_t& s) {
            zmq::message_t id, m;
            (void)s.recv(id);
            (void)s.recv(m);
            bad += m.size() != bytes;
          }));
      auto send = [&](zmq::socket_t& s) { (void)comm::send_packet(s, actors::remote::pack(call, {t}), false); };
      auto receive = [&](zmq::socket_t& s) {
        auto p = comm::recv_packet(s, true, std::chrono::milliseconds(-1));
        auto u = p && *p ? actors::remote::unpack(**p) : result<actors::remote::unpacked>(make_error("recv", "no message"));
        bad += !u || u->tensors.size() != 1 || model::bytes(u->tensors[0]) != bytes;
      };
      ours_s.push_back(run_once(count, send, receive));
      if (keys) curve_s.push_back(run_once(count, send, receive, &*keys));
    }
    if (bad) return report(make_error("bench", std::to_string(bad) + " messages arrived wrong"));
    std::sort(raw_s.begin(), raw_s.end());
    std::sort(ours_s.begin(), ours_s.end());
    std::sort(curve_s.begin(), curve_s.end());
    const double gb = static_cast<double>(bytes) * count / 1e9;
    const double raw = gb / raw_s[raw_s.size() / 2], ours = gb / ours_s[ours_s.size() / 2];
    const double curve = curve_s.empty() ? 0 : gb / curve_s[curve_s.size() / 2];
    nlohmann::json row = {{"bytes", bytes}, {"messages", count}, {"raw_gb_per_s", raw}, {"dynapar_gb_per_s", ours}, {"ratio", ours / raw}};
    if (keys) {
      row["curve_gb_per_s"] = curve;
      row["curve_ratio"] = curve / ours;
    }
    rows.push_back(row);
    if (!o.json) {
      std::cout << std::left << std::setw(10) << (std::to_string(static_cast<int>(kib)) + " KiB") << std::setw(10) << count
                << std::setw(14) << std::setprecision(3) << raw << std::setw(16) << ours << std::setw(16) << ours / raw;
      if (keys) std::cout << std::setw(14) << curve << curve / ours;
      std::cout << "\n";
    }
  }
  if (o.json) std::cout << rows.dump(2) << "\n";
  return exit_ok;
}

}  // namespace

void add_bench_wire(CLI::App& bench, runner& run) {
  auto o = std::make_shared<wire_options>();
  auto* sub = bench.add_subcommand("wire", "Tensor messages between processes against raw ZeroMQ over TCP loopback");
  sub->add_option("--sizes-kib", o->sizes_kib, "Message sizes in KiB (default 16,256,1024,4096)")->delimiter(',')->check(CLI::Range(0.001, 1048576.0));
  sub->add_option("--mib", o->mib_per_run, "MiB sent per run and size (default 256)")->check(CLI::Range(1.0, 65536.0));
  sub->add_option("--rounds", o->rounds, "Runs per size and path, alternating; the median is reported (default 5)")->check(CLI::Range(1, 100));
  sub->add_flag("--json", o->json, "JSON rows instead of a table");
  sub->add_flag("--curve", o->curve, "Also run the dynapar path over CURVE (authenticated encryption) and report its ratio to plain");
  sub->callback([o, &run] { run = [o] { return wire_main(*o); }; });
}

}  // namespace dynapar::cli
