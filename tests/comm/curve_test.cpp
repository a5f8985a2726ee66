// CURVE over real TCP sockets on loopback (docs/SECURITY.md): key files and their modes, a
// server that admits only listed keys, a client that pins the server's key, and a man in the
// middle whose tampered or replayed bytes never reach the application.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "comm/curve.hpp"
#include "comm/packet.hpp"
#include "support/loopback.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("dynapar_curve_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d.string();
}

comm::key_pair pair_of(const std::string& name, comm::key_role role) {
  auto k = comm::make_key_pair(name, role);
  REQUIRE(k);
  return *k;
}

// A ROUTER serving CURVE with its context's ZAP handler, as the controller does.
struct server {
  zmq::context_t ctx{1};
  std::unique_ptr<comm::authenticator> auth;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::string endpoint;
  int port = 0;
  server(const comm::key_pair& own, std::vector<comm::public_key> admitted, comm::authenticator::reload_fn reload = {}) {
    auto a = comm::authenticator::start(ctx, std::move(admitted), {}, std::move(reload));
    REQUIRE(a);
    auth = std::move(*a);
    REQUIRE(comm::make_curve_server(router, comm::server_keys{own, {}, ""}));
    router.set(zmq::sockopt::linger, 0);
    router.bind("tcp://127.0.0.1:0");
    endpoint = router.get(zmq::sockopt::last_endpoint);
    port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  }
  // The next message within `ms`, if any.
  std::optional<comm::packet> next(int ms) {
    auto p = comm::recv_packet(router, true, std::chrono::milliseconds(ms));
    REQUIRE(p);
    return std::move(*p);
  }
};

struct client {
  zmq::context_t ctx{1};
  zmq::socket_t dealer{ctx, zmq::socket_type::dealer};
  std::unique_ptr<comm::handshake_watch> watch;
  client(const std::optional<comm::client_keys>& keys, const std::string& endpoint) {
    dealer.set(zmq::sockopt::linger, 0);
    if (keys) REQUIRE(comm::make_curve_client(dealer, *keys));
    watch = std::make_unique<comm::handshake_watch>(ctx, dealer, keys.has_value());
    dealer.connect(endpoint);
  }
  void send(const std::string& text) {
    comm::packet p;
    p.header.assign(text.begin(), text.end());
    REQUIRE(comm::send_packet(dealer, std::move(p), false));
  }
  // Why the handshake failed, waiting up to `ms` for the verdict.
  std::optional<std::string> failure(int ms) {
    for (int i = 0; i < ms / 10; ++i) {
      if (auto f = watch->failure()) return f;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return watch->failure();
  }
};

std::string text_of(const comm::packet& p) { return std::string(p.header.begin(), p.header.end()); }

// A TCP relay between one client and the server that can flip a byte of what the client sends
// and records it all, so that it can be replayed on a new connection.
struct man_in_the_middle {
  int listener = -1, port = 0, server_port;
  std::atomic<bool> tamper{false}, stop{false};
  std::mutex mu;
  std::string recorded;  // client to server, as relayed
  std::thread relay;
  explicit man_in_the_middle(int to) : server_port(to) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    socklen_t n = sizeof a;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
    relay = std::thread([this] { run(); });
  }
  ~man_in_the_middle() {
    stop = true;
    relay.join();
    ::close(listener);
  }
  void run() {
    pollfd l{listener, POLLIN, 0};
    while (!stop && ::poll(&l, 1, 50) == 0) {
    }
    if (stop) return;
    const int c = ::accept(listener, nullptr, nullptr);
    const int s = connect_loopback(server_port);
    char buf[65536];
    while (!stop) {
      pollfd fds[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
      if (::poll(fds, 2, 50) <= 0) continue;
      if (fds[0].revents & (POLLIN | POLLHUP)) {
        const auto n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        if (tamper) buf[n - 1] ^= 0x01;  // in the last frame's ciphertext or MAC
        {
          std::lock_guard<std::mutex> lock(mu);
          recorded.append(buf, static_cast<std::size_t>(n));
        }
        if (::write(s, buf, static_cast<std::size_t>(n)) != n) break;
      }
      if (fds[1].revents & (POLLIN | POLLHUP)) {
        const auto n = ::read(s, buf, sizeof buf);
        if (n <= 0) break;
        if (::write(c, buf, static_cast<std::size_t>(n)) != n) break;
      }
    }
    ::close(c);
    ::close(s);
  }
};

}  // namespace

TEST_CASE("key files round-trip, and loose modes or foreign halves are refused", "[curve]") {
  const auto dir = temp_dir("files");
  const auto k = pair_of("gpu-box-3", comm::key_role::node);
  REQUIRE(comm::write_key_pair(dir, k));
  struct stat st {};
  REQUIRE(::stat((dir + "/gpu-box-3.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto back = comm::read_key_pair(dir + "/gpu-box-3.key");
  REQUIRE(back);
  CHECK(back->pub.key == k.pub.key);
  CHECK(back->secret == k.secret);
  CHECK(back->pub.role == comm::key_role::node);
  auto pub = comm::read_public_key(dir + "/gpu-box-3.pub");
  REQUIRE(pub);
  CHECK(pub->key == k.pub.key);

  fs::permissions(dir + "/gpu-box-3.key", fs::perms::group_read, fs::perm_options::add);
  auto loose = comm::read_key_pair(dir + "/gpu-box-3.key");
  REQUIRE_FALSE(loose);
  CHECK(loose.err().code == "bad_key_mode");
  CHECK(loose.err().message.find("chmod 600") != std::string::npos);

  // A secret paired with another key's public half.
  const auto other = pair_of("other", comm::key_role::node);
  std::ofstream(dir + "/mixed.key") << "name: mixed\nrole: node\npublic: " << other.pub.key << "\nsecret: " << k.secret << "\n";
  fs::permissions(dir + "/mixed.key", fs::perms::owner_read | fs::perms::owner_write);
  auto mixed = comm::read_key_pair(dir + "/mixed.key");
  REQUIRE_FALSE(mixed);
  CHECK(mixed.err().message.find("does not belong") != std::string::npos);

  std::ofstream(dir + "/junk.pub") << "name: junk\nrole: node\npublic: not-a-key\n";
  auto junk = comm::read_public_key(dir + "/junk.pub");
  REQUIRE_FALSE(junk);
  CHECK(junk.err().message.find(dir + "/junk.pub") != std::string::npos);
  CHECK_FALSE(comm::parse_role("admin"));

  // launch --local's deployment loads on both sides.
  const auto local = temp_dir("local");
  REQUIRE(comm::write_local_keys(local, 2, {5}));
  auto srv = comm::load_server_keys(comm::local_controller_keys(local));
  REQUIRE(srv);
  CHECK(srv->authorized.size() == 4);  // node-0, node-1, device-5, the operator
  auto op = comm::load_client_keys(comm::local_operator_keys(local), {"operator"});
  REQUIRE(op);
  CHECK(op->server_key == srv->own.pub.key);
  CHECK(op->own.pub.role == comm::key_role::operator_);
  auto n1 = comm::load_client_keys(local, {"node-1"});
  REQUIRE(n1);
  CHECK(n1->server_key == srv->own.pub.key);
  // The nodes' directory holds no secret but the nodes' own, each node's alone: no shared
  // node key, and neither the controller's nor the operator's secret.
  std::vector<std::string> secrets;
  for (const auto& e : fs::directory_iterator(local))
    if (e.path().extension() == ".key") secrets.push_back(e.path().filename().string());
  std::sort(secrets.begin(), secrets.end());
  CHECK(secrets == std::vector<std::string>{"device-5.key", "node-0.key", "node-1.key"});
  for (const auto& d : {local, comm::local_controller_keys(local), comm::local_operator_keys(local)})
    CHECK((fs::status(d).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CHECK_FALSE(comm::load_client_keys(local, {"operator"}));
  auto none = comm::load_client_keys(local, {"nobody"});
  REQUIRE_FALSE(none);
  CHECK(none.err().message.find("dynapar keygen") != std::string::npos);
  fs::remove_all(dir);
  fs::remove_all(local);
  fs::remove_all(comm::local_controller_keys(local));
  fs::remove_all(comm::local_operator_keys(local));
}

TEST_CASE("a CURVE server admits listed keys only, and a client pins the server's key", "[curve]") {
  const auto ctl = pair_of("controller", comm::key_role::controller);
  const auto node = pair_of("node-a", comm::key_role::node);
  const auto stranger = pair_of("stranger", comm::key_role::node);
  server s(ctl, {node.pub});

  client good(comm::client_keys{node, ctl.pub.key}, s.endpoint);
  good.send("hello");
  auto got = s.next(5000);
  REQUIRE(got);
  CHECK(text_of(*got) == "hello");
  CHECK(got->peer == "node:node-a");  // the key's role and name, from the ZAP handler
  CHECK(comm::peer_role(got->peer) == comm::key_role::node);

  client unlisted(comm::client_keys{stranger, ctl.pub.key}, s.endpoint);
  unlisted.send("let me in");
  auto why = unlisted.failure(5000);
  REQUIRE(why);
  CHECK(why->find("refused this key") != std::string::npos);
  CHECK(s.auth->refused() >= 1);

  const auto impostor = pair_of("controller", comm::key_role::controller);
  client pinned_wrong(comm::client_keys{node, impostor.pub.key}, s.endpoint);
  pinned_wrong.send("are you the controller?");
  why = pinned_wrong.failure(8000);
  REQUIRE(why);
  CHECK(why->find("controller.pub") != std::string::npos);

  client plain(std::nullopt, s.endpoint);
  plain.send("no keys");
  why = plain.failure(5000);
  REQUIRE(why);
  CHECK(why->find("does not") != std::string::npos);
  CHECK_FALSE(s.next(300));  // none of the three got a message through
}

TEST_CASE("a key admitted in authorized/ after the server started gets in, others still do not", "[curve]") {
  const auto dir = temp_dir("reload");
  const auto ctl = pair_of("controller", comm::key_role::controller);
  const auto first = pair_of("first", comm::key_role::node);
  const auto late = pair_of("slurm-7-0", comm::key_role::node);
  const auto stranger = pair_of("stranger", comm::key_role::node);
  REQUIRE(comm::write_public_key(dir, first.pub));
  std::mutex errors_mutex;  // the reloader says why on the authenticator's thread
  std::vector<std::string> errors;
  auto read = comm::authorized_reloader(dir, [&](const std::string& why) {
    std::lock_guard lock(errors_mutex);
    errors.push_back(why);
  });
  auto loaded = comm::read_public_keys(dir);
  REQUIRE(loaded);
  server s(ctl, *loaded, read);

  client early(comm::client_keys{late, ctl.pub.key}, s.endpoint);  // before its key is admitted
  early.send("too soon");
  auto why = early.failure(5000);
  REQUIRE(why);
  CHECK(why->find("refused this key") != std::string::npos);
  CHECK_FALSE(s.auth->key_of("node:slurm-7-0"));

  REQUIRE(comm::write_public_key(dir, late.pub));  // what `dynapar keygen --authorize` does
  client now(comm::client_keys{late, ctl.pub.key}, s.endpoint);
  now.send("my key is in authorized/ now");
  auto got = s.next(5000);
  REQUIRE(got);
  CHECK(got->peer == "node:slurm-7-0");
  CHECK(s.auth->key_of("node:slurm-7-0") == late.pub.key);
  CHECK(s.auth->key_of("node:first") == first.pub.key);

  client unlisted(comm::client_keys{stranger, ctl.pub.key}, s.endpoint);
  unlisted.send("and me?");
  REQUIRE(unlisted.failure(5000));
  // A file that does not parse leaves the admitted keys as they were, and says why.
  std::ofstream(fs::path(dir) / "broken.pub") << "not a key\n";
  client again(comm::client_keys{stranger, ctl.pub.key}, s.endpoint);
  again.send("now?");
  REQUIRE(again.failure(5000));
  {
    std::lock_guard lock(errors_mutex);
    CHECK_FALSE(errors.empty());
  }
  CHECK(s.auth->key_of("node:slurm-7-0") == late.pub.key);
  CHECK_FALSE(s.next(300));
  fs::remove_all(dir);
}

TEST_CASE("tampered and replayed CURVE traffic never reaches the application", "[curve]") {
  const auto ctl = pair_of("controller", comm::key_role::controller);
  const auto op = pair_of("alice", comm::key_role::operator_);
  server s(ctl, {op.pub});
  man_in_the_middle mitm(s.port);
  client c(comm::client_keys{op, ctl.pub.key}, "tcp://127.0.0.1:" + std::to_string(mitm.port));
  c.send("inject slow 0");
  auto first = s.next(5000);
  REQUIRE(first);
  CHECK(text_of(*first) == "inject slow 0");
  std::string session;
  {
    std::lock_guard<std::mutex> lock(mitm.mu);
    session = mitm.recorded;  // the handshake and the first message
  }
  REQUIRE(session.size() > 64);

  mitm.tamper = true;
  c.send("inject kill 1");
  CHECK_FALSE(s.next(1000));  // the flipped bit fails authentication: the frame is dropped

  // The whole first session again, on a connection of its own: the server's fresh cookie and
  // short-term keys make the old INITIATE and message useless.
  const int raw = connect_loopback(s.port);
  REQUIRE(raw >= 0);
  REQUIRE(::write(raw, session.data(), session.size()) == static_cast<ssize_t>(session.size()));
  CHECK_FALSE(s.next(1500));
  ::close(raw);
}
