// One message between processes: a header (Cap'n Proto bytes, runtime/wire) and data frames
// (tensor bytes), each its own ZeroMQ frame. Data frames are sent without a copy (ZeroMQ keeps
// the blob's owner until the bytes are out) and received without one (the blob owns the
// frame). On a ROUTER socket `route` is the peer's identity frame.
#pragma once

#include <chrono>
#include <mutex>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/blob.hpp"
#include "common/result.hpp"

namespace dynapar::comm {

struct packet {
  std::string route;
  std::string peer;  // received over CURVE: the sender's key, "ROLE:NAME" (comm/curve.hpp); else empty
  std::vector<std::uint8_t> header;
  std::vector<blob> blobs;
};

struct packet_limits {
  std::size_t max_frames = 4096;      // header + data frames
  std::size_t max_bytes = 1u << 30;   // all frames together (one frame: ZMQ_MAXMSGSIZE on the socket)
};

// Messages a socket queues for one peer (ZMQ_SNDHWM) before it refuses more: bounded, so
// that a peer that stopped reading costs bounded memory; each side counts what it drops.
inline constexpr int queue_messages = 10000;

// With `dont_wait`, a peer whose queue is full gets nothing (error "full") instead of the
// call blocking, and on a ROUTER with ZMQ_ROUTER_MANDATORY a route it does not know is
// "unreachable"; other failures are "send".
status send_packet(zmq::socket_t& s, packet p, bool routed, bool dont_wait = false);
// Waits up to `wait` (0: does not wait). Nothing: no message within the wait. A message
// with too many frames or bytes is read to its end and reported as an error.
result<std::optional<packet>> recv_packet(zmq::socket_t& s, bool routed, std::chrono::milliseconds wait,
                                          const packet_limits& limits = {});

// Many threads post packets; one network thread owns the real sockets (ZeroMQ sockets are not
// thread-safe) and reads what was posted from an inproc PULL socket bound at `address`
// (before the outbox connects). The route travels as the first frame.
class outbox {
 public:
  outbox(zmq::context_t& ctx, const std::string& address);
  status post(packet p);

 private:
  std::mutex mu_;
  zmq::socket_t push_;
};

// Endpoints: tcp://HOST:PORT. A host other than loopback must be allowed explicitly, so that
// nothing is reachable from other machines by accident, and needs CURVE keys (docs/SECURITY.md).
status check_endpoint(const std::string& endpoint, bool allow_remote, bool has_keys);
// Whether a host names this machine only: `localhost`, an IPv4 address in 127.0.0.0/8 or
// the IPv6 ::1 (bracketed or not), parsed as an address: "127.evil.example" is a name that
// resolves anywhere, not loopback.
bool is_loopback(const std::string& host);

}  // namespace dynapar::comm
