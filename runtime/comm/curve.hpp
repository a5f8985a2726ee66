// CURVE on ZeroMQ sockets (docs/SECURITY.md): a server that admits only listed client keys
// (a ZAP handler, RFC 27), a client that pins the server's key, and a watch that tells a
// client why its handshake failed instead of letting it wait in silence.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "comm/keys.hpp"

namespace dynapar::comm {

// Before bind/connect. The server's messages then carry the client's "ROLE:NAME" as
// `packet::peer` (set by the authenticator).
status make_curve_server(zmq::socket_t& s, const server_keys& k);
status make_curve_client(zmq::socket_t& s, const client_keys& k);

// The ZAP handler of one ZeroMQ context; it must run before a CURVE server socket of that
// context accepts a connection (without a handler libzmq would admit every key). Admits a
// client whose key is listed (not a controller key), refuses every other; `on_refusal` hears
// of each refusal (from the handler's thread). `reload`, where given, is asked for a new
// list before a key not listed is refused (authorized_reloader: keys admitted since).
class authenticator {
 public:
  using reload_fn = std::function<std::optional<std::vector<public_key>>()>;
  static result<std::unique_ptr<authenticator>> start(zmq::context_t& ctx, std::vector<public_key> authorized,
                                                      std::function<void(const std::string&)> on_refusal = {},
                                                      reload_fn reload = {});
  ~authenticator();
  authenticator(const authenticator&) = delete;
  authenticator& operator=(const authenticator&) = delete;
  int refused() const { return refused_; }
  // Replaces the admitted keys (a node's data socket admits the current peers only); a
  // connection already admitted stays.
  void authorize(std::vector<public_key> keys);
  // The Z85 public key of an admitted peer ("ROLE:NAME", as packets name it), if listed.
  std::optional<std::string> key_of(const std::string& peer);

 private:
  authenticator() = default;
  void loop();
  std::unique_ptr<zmq::socket_t> rep_;
  std::mutex mu_;
  std::vector<public_key> keys_;  // guarded by mu_
  std::function<void(const std::string&)> on_refusal_;
  reload_fn reload_;  // handler thread only
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::thread thread_;
};

// The role part of a peer id ("node:gpu-box-3" -> node); nothing when the peer is not
// authenticated (no CURVE).
std::optional<key_role> peer_role(const std::string& peer);

// Watches a client socket's handshakes (a ZeroMQ socket monitor). `failure()` says, without
// waiting, why the handshake failed when it did: refused by the server's ZAP handler, or
// closed by a server that does not hold the pinned key or does not speak CURVE.
class handshake_watch {
 public:
  // `curve`: whether the socket speaks CURVE (a plain one fails against a CURVE server).
  handshake_watch(zmq::context_t& ctx, zmq::socket_t& s, bool curve);
  std::optional<std::string> failure();

 private:
  zmq::socket_t pair_;
  bool curve_ = true, succeeded_ = false;
  int closed_ = 0;
  std::optional<std::string> failure_;
};

}  // namespace dynapar::comm
