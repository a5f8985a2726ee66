#include "comm/packet.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <memory>

namespace dynapar::comm {
namespace {

// ZeroMQ calls this when it no longer needs a sent frame: it drops the blob's owner.
void release(void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }

zmq::message_t frame(const blob& b) {
  if (b.size == 0) return zmq::message_t();
  auto* keep = new std::shared_ptr<const void>(b.owner);
  return zmq::message_t(const_cast<void*>(b.data), b.size, release, keep);
}

}  // namespace

status send_packet(zmq::socket_t& s, packet p, bool routed, bool dont_wait) {
  try {
    // The first frame decides: once it is queued, ZeroMQ takes the message's other frames.
    const auto first = dont_wait ? zmq::send_flags::dontwait : zmq::send_flags::none;
    const auto more = p.blobs.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore;
    const bool queued = routed ? s.send(zmq::buffer(p.route), zmq::send_flags::sndmore | first).has_value()
                               : s.send(zmq::buffer(p.header), more | first).has_value();
    if (!queued) return make_error("full", "the queue to '" + p.route + "' is full (its send HWM): a message was dropped");
    if (routed) s.send(zmq::buffer(p.header), more);
    for (std::size_t i = 0; i < p.blobs.size(); ++i)
      s.send(frame(p.blobs[i]), i + 1 < p.blobs.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    return ok_status();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return make_error("unreachable", "no peer '" + p.route + "' is connected: a message was dropped");
    return make_error("send", std::string("sending a message failed: ") + e.what());
  }
}

result<std::optional<packet>> recv_packet(zmq::socket_t& s, bool routed, std::chrono::milliseconds wait,
                                          const packet_limits& limits) {
  try {
    zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) == 0) return std::optional<packet>{};
    std::vector<std::shared_ptr<zmq::message_t>> frames;
    std::size_t total = 0;
    bool too_big = false;
    do {
      auto m = std::make_shared<zmq::message_t>();
      if (!s.recv(*m, zmq::recv_flags::dontwait)) return make_error("recv", "a message ended early");
      total += m->size();
      if (frames.size() >= limits.max_frames || total > limits.max_bytes) too_big = true;
      if (!too_big) frames.push_back(std::move(m));
    } while (s.get(zmq::sockopt::rcvmore));
    if (too_big) return make_error("too_large", "a message of more than " + std::to_string(limits.max_frames) +
                                                    " frames or " + std::to_string(limits.max_bytes) + " bytes was dropped");
    packet p;
    std::size_t at = 0;
    if (routed) {
      if (frames.empty()) return make_error("malformed", "a message without its sender's identity");
      p.route = frames[0]->to_string();
      at = 1;
    }
    if (at >= frames.size()) return make_error("malformed", "a message without a header");
    // Set by the ZAP handler on CURVE sockets; absent (null, no exception) on plain ones.
    if (const char* who = zmq_msg_gets(frames[at]->handle(), "User-Id")) p.peer = who;
    const auto* h = static_cast<const std::uint8_t*>(frames[at]->data());
    p.header.assign(h, h + frames[at]->size());
    for (++at; at < frames.size(); ++at) p.blobs.push_back(blob{frames[at]->data(), frames[at]->size(), frames[at]});
    return std::optional<packet>(std::move(p));
  } catch (const zmq::error_t& e) {
    return make_error("recv", std::string("receiving a message failed: ") + e.what());
  }
}

outbox::outbox(zmq::context_t& ctx, const std::string& address) : push_(ctx, zmq::socket_type::push) {
  push_.set(zmq::sockopt::linger, 0);
  push_.connect(address);
}

status outbox::post(packet p) {
  std::lock_guard<std::mutex> lock(mu_);
  return send_packet(push_, std::move(p), true);
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  in6_addr v6{};
  return inet_pton(AF_INET6, bare.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

status check_endpoint(const std::string& endpoint, bool allow_remote, bool has_keys) {
  const std::string prefix = "tcp://";
  if (endpoint.rfind(prefix, 0) != 0) return make_error("bad_endpoint", "'" + endpoint + "' is not tcp://HOST:PORT");
  const auto rest = endpoint.substr(prefix.size());
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
    return make_error("bad_endpoint", "'" + endpoint + "' is not tcp://HOST:PORT");
  const auto host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (port != "*" && port.find_first_not_of("0123456789") != std::string::npos)
    return make_error("bad_endpoint", "'" + endpoint + "': the port must be a number");
  if (port != "*" && port.size() > 5) return make_error("bad_endpoint", "'" + endpoint + "': port out of range");
  if (port != "*" && std::stoi(port) > 65535) return make_error("bad_endpoint", "'" + endpoint + "': port out of range");
  const bool loopback = is_loopback(host);
  if (!loopback && !has_keys)
    return make_error("bad_endpoint", "'" + endpoint + "' is reachable beyond this machine: that needs CURVE keys (--keys DIR, made by "
                                      "`dynapar keygen --out DIR --role controller|node|operator`; docs/SECURITY.md) and --allow-remote");
  if (!loopback && !allow_remote)
    return make_error("bad_endpoint", "'" + endpoint + "' is reachable beyond this machine; pass --allow-remote to allow it");
  return ok_status();
}

}  // namespace dynapar::comm
