#include "comm/curve.hpp"

#include <cstring>
#include <sstream>

namespace dynapar::comm {

status make_curve_server(zmq::socket_t& s, const server_keys& k) {
  try {
    s.set(zmq::sockopt::curve_server, 1);
    s.set(zmq::sockopt::curve_secretkey, k.own.secret);
    s.set(zmq::sockopt::zap_domain, "dynapar");
    return ok_status();
  } catch (const zmq::error_t& e) {
    return make_error("no_curve", std::string("cannot serve CURVE: ") + e.what());
  }
}

status make_curve_client(zmq::socket_t& s, const client_keys& k) {
  try {
    s.set(zmq::sockopt::curve_serverkey, k.server_key);
    s.set(zmq::sockopt::curve_publickey, k.own.pub.key);
    s.set(zmq::sockopt::curve_secretkey, k.own.secret);
    return ok_status();
  } catch (const zmq::error_t& e) {
    return make_error("no_curve", std::string("cannot speak CURVE: ") + e.what());
  }
}

result<std::unique_ptr<authenticator>> authenticator::start(zmq::context_t& ctx, std::vector<public_key> authorized,
                                                            std::function<void(const std::string&)> on_refusal, reload_fn reload) {
  std::unique_ptr<authenticator> a(new authenticator());
  a->keys_ = std::move(authorized);
  a->on_refusal_ = std::move(on_refusal);
  a->reload_ = std::move(reload);
  try {
    a->rep_ = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::rep);
    a->rep_->set(zmq::sockopt::linger, 0);
    a->rep_->bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return make_error("zap", std::string("cannot start the ZAP handler (one per context): ") + e.what());
  }
  a->thread_ = std::thread([raw = a.get()] { raw->loop(); });
  return a;
}

void authenticator::authorize(std::vector<public_key> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_ = std::move(keys);
}

std::optional<std::string> authenticator::key_of(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : keys_)
    if (peer == to_string(k.role) + ":" + k.name) return k.key;
  return std::nullopt;
}

namespace {
// ROLE:NAME of a listed client key (never a controller's).
std::optional<std::string> admitted(const std::vector<public_key>& keys, const char* z85) {
  for (const auto& k : keys)
    if (k.key == z85 && k.role != key_role::controller) return to_string(k.role) + ":" + k.name;
  return std::nullopt;
}
}  // namespace

authenticator::~authenticator() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void authenticator::loop() {
  // RFC 27: version, request id, domain, address, routing id, mechanism, credentials.
  while (!stop_) {
    zmq::pollitem_t item{static_cast<void*>(*rep_), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) == 0) continue;
    std::vector<zmq::message_t> req;
    do {
      req.emplace_back();
      if (!rep_->recv(req.back(), zmq::recv_flags::none)) return;
    } while (rep_->get(zmq::sockopt::rcvmore) && req.size() < 16);
    while (rep_->get(zmq::sockopt::rcvmore)) {  // more frames than the RFC has: drain them
      zmq::message_t extra;
      (void)rep_->recv(extra, zmq::recv_flags::none);
    }
    std::string status = "400", text = "key not authorized", user;
    const std::string address = req.size() > 3 ? req[3].to_string() : "?";
    if (req.size() < 7 || req[0].to_string() != "1.0") {
      text = "malformed ZAP request";
    } else if (req[5].to_string() != "CURVE" || req[6].size() != 32) {
      text = "only CURVE is admitted";
    } else {
      char z85[41];
      zmq_z85_encode(z85, static_cast<const std::uint8_t*>(req[6].data()), 32);
      std::unique_lock<std::mutex> lock(mu_);
      auto who = admitted(keys_, z85);
      if (!who && reload_) {
        lock.unlock();  // reading the directory takes a while: key_of may go on meanwhile
        auto fresh = reload_();
        lock.lock();
        if (fresh) {
          keys_ = std::move(*fresh);
          who = admitted(keys_, z85);
        }
      }
      if (who) {
        status = "200";
        text = "OK";
        user = *who;
      } else {
        text = "key " + std::string(z85) + " is not authorized";
      }
    }
    if (status != "200") {
      ++refused_;
      if (on_refusal_) on_refusal_("refused a connection from " + address + ": " + text);
    }
    const std::string version = "1.0";
    const std::string id = req.size() > 1 ? req[1].to_string() : "";
    try {
      rep_->send(zmq::buffer(version), zmq::send_flags::sndmore);
      rep_->send(zmq::buffer(id), zmq::send_flags::sndmore);
      rep_->send(zmq::buffer(status), zmq::send_flags::sndmore);
      rep_->send(zmq::buffer(text), zmq::send_flags::sndmore);
      rep_->send(zmq::buffer(user), zmq::send_flags::sndmore);
      rep_->send(zmq::message_t(), zmq::send_flags::none);
    } catch (const zmq::error_t&) {
      return;  // the context is closing
    }
  }
}

std::optional<key_role> peer_role(const std::string& peer) {
  auto r = parse_role(peer.substr(0, peer.find(':')));
  if (!r) return std::nullopt;
  return *r;
}

handshake_watch::handshake_watch(zmq::context_t& ctx, zmq::socket_t& s, bool curve) : pair_(ctx, zmq::socket_type::pair), curve_(curve) {
  std::ostringstream addr;
  addr << "inproc://dynapar-handshake-" << static_cast<const void*>(&s);
  const int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_DISCONNECTED;
  if (zmq_socket_monitor(s.handle(), addr.str().c_str(), events) == 0) pair_.connect(addr.str());
}

std::optional<std::string> handshake_watch::failure() {
  while (true) {
    zmq::message_t head, where;
    try {
      if (!pair_.recv(head, zmq::recv_flags::dontwait)) break;
      if (pair_.get(zmq::sockopt::rcvmore)) (void)pair_.recv(where, zmq::recv_flags::none);
    } catch (const zmq::error_t&) {
      break;  // not monitoring (the monitor could not start)
    }
    if (head.size() < 6) continue;
    std::uint16_t event = 0;
    std::uint32_t value = 0;
    std::memcpy(&event, head.data(), 2);
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, 4);
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      succeeded_ = true;
      closed_ = 0;
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      failure_ = "the controller refused this key (status " + std::to_string(value) +
                 "): its public key is not in the controller's authorized/ directory";
    } else if (!curve_ && (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)) {
      failure_ = "the controller speaks CURVE and this client does not: pass --keys DIR with this client's key and the "
                 "controller's public key (docs/SECURITY.md)";
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      failure_ = "the CURVE handshake with the controller failed: it does not speak CURVE, or it does not hold the "
                 "key this client pins (controller.pub)";
    } else if (event == ZMQ_EVENT_DISCONNECTED && curve_ && !succeeded_ && ++closed_ >= 3) {
      failure_ = "the controller closed the connection during the handshake three times: it does not hold the key "
                 "this client pins (controller.pub), or it does not speak CURVE";
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
      succeeded_ = false;
    }
  }
  return failure_;
}

}  // namespace dynapar::comm
