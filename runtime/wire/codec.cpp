#include "wire/codec.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "common/overloaded.hpp"
#include "control.capnp.h"
#include "wire/capnp_fields.hpp"

namespace dynapar::wire {
namespace {

void set_spec(schema::DeviceSpec::Builder b, const planner::device_spec& d) {
  b.setId(d.id);
  b.setName(d.name);
  b.setSpeed(d.speed);
  b.setMemoryBytes(d.memory_bytes);
  b.setPricePerS(d.price_per_s);
  b.setPowerW(d.power_w);
  b.setNode(d.node);
  b.setRack(d.rack);
  b.setNicBw(d.nic_bw == planner::unlimited ? 0.0 : d.nic_bw);
}

planner::device_spec read_spec(schema::DeviceSpec::Reader r, const decode_limits& lim, const std::string& where) {
  planner::device_spec d;
  d.id = r.getId();
  d.name = text(r.getName(), lim, where + ".name");
  d.speed = r.getSpeed();
  d.memory_bytes = r.getMemoryBytes();
  d.price_per_s = r.getPricePerS();
  d.power_w = r.getPowerW();
  d.node = r.getNode();
  d.rack = r.getRack();
  d.nic_bw = r.getNicBw() == 0.0 ? planner::unlimited : r.getNicBw();
  return d;
}

body read_body(schema::Envelope::Reader env, const decode_limits& lim) {
  auto b = env.getBody();
  switch (b.which()) {
    case schema::Envelope::Body::JOIN: {
      auto r = b.getJoin();
      join_msg m;
      m.node = text(r.getNode(), lim, "join.node");
      auto devs = r.getDevices();
      check_list(devs, lim, "join.devices");
      for (std::size_t i = 0; i < devs.size(); ++i) m.devices.push_back(read_spec(devs[i], lim, "join.devices[" + std::to_string(i) + "]"));
      m.data_endpoint = text(r.getDataEndpoint(), lim, "join.dataEndpoint");
      return m;
    }
    case schema::Envelope::Body::PEERS: {
      auto r = b.getPeers();
      peers_msg m;
      m.generation = r.getGeneration();
      auto ps = r.getPeers();
      check_list(ps, lim, "peers.peers");
      for (std::size_t i = 0; i < ps.size(); ++i) {
        const std::string where = "peers.peers[" + std::to_string(i) + "]";
        peer_entry e;
        e.node = text(ps[i].getNode(), lim, where + ".node");
        e.endpoint = text(ps[i].getEndpoint(), lim, where + ".endpoint");
        e.public_key = text(ps[i].getPublicKey(), lim, where + ".publicKey");
        auto devs = ps[i].getDevices();
        check_list(devs, lim, where + ".devices");
        for (auto d : devs) e.devices.push_back(d);
        m.peers.push_back(std::move(e));
      }
      return m;
    }
    case schema::Envelope::Body::LEAVE: {
      auto r = b.getLeave();
      leave_msg m;
      m.node = text(r.getNode(), lim, "leave.node");
      auto devs = r.getDevices();
      check_list(devs, lim, "leave.devices");
      for (auto d : devs) m.devices.push_back(d);
      m.reason = text(r.getReason(), lim, "leave.reason");
      return m;
    }
    case schema::Envelope::Body::HEARTBEAT: {
      auto r = b.getHeartbeat();
      return heartbeat_msg{text(r.getNode(), lim, "heartbeat.node"), r.getTimeNs(), r.getDataHash(), r.getPeakRssMb(), r.getLoading()};
    }
    case schema::Envelope::Body::FAULT: {
      auto r = b.getFault();
      fault_command m;
      const auto k = static_cast<std::uint16_t>(r.getKind());
      if (k > static_cast<std::uint16_t>(schema::FaultKind::PARTITION)) throw reject{"bad_field", "fault.kind has an unknown value"};
      m.kind = static_cast<fault_kind>(k);
      m.device = r.getDevice();
      m.factor = r.getFactor();
      m.duration_steps = to_int(r.getDurationSteps(), "fault.durationSteps");
      m.peer = r.getPeer();
      m.duration_s = r.getDurationS();
      return m;
    }
    case schema::Envelope::Body::WELCOME: {
      auto r = b.getWelcome();
      welcome_msg m;
      m.accepted = r.getAccepted();
      m.reason = text(r.getReason(), lim, "welcome.reason");
      auto devs = r.getDevices();
      check_list(devs, lim, "welcome.devices");
      for (auto d : devs) m.devices.push_back(d);
      m.model = text(r.getModel(), lim, "welcome.model");
      m.seed = r.getSeed();
      m.optimizer = text(r.getOptimizer(), lim, "welcome.optimizer");
      m.lr = r.getLr();
      m.momentum = r.getMomentum();
      m.weight_decay = r.getWeightDecay();
      m.nesterov = r.getNesterov();
      m.schedule.kind = text(r.getSchedule(), lim, "welcome.schedule");
      if (m.schedule.kind.empty()) m.schedule.kind = "constant";
      m.schedule.warmup_steps = r.getWarmupSteps();
      m.schedule.steps = r.getScheduleSteps();
      m.schedule.step_size = r.getStepSize();
      m.schedule.gamma = r.getGamma();
      m.schedule.min_lr = r.getMinLr();
      m.label_smoothing = r.getLabelSmoothing();
      m.bf16 = r.getBf16();
      m.rejoin = r.getRejoin();
      m.model_hash = text(r.getModelHash(), lim, "welcome.modelHash");
      m.data = text(r.getData(), lim, "welcome.data");
      m.data_samples = to_int(r.getDataSamples(), "welcome.dataSamples");
      m.data_hash = r.getDataHash();
      return m;
    }
    case schema::Envelope::Body::CALL: return read_call(b.getCall(), lim);
  }
  throw reject{"malformed", "envelope.body has an unknown kind (a newer protocol?)"};
}

}  // namespace

std::vector<std::uint8_t> encode(const envelope& e) {
  capnp::MallocMessageBuilder mb;
  auto env = mb.initRoot<schema::Envelope>();
  env.setVersion(e.version);
  env.setSender(e.sender);
  env.setSeq(e.seq);
  auto b = env.initBody();
  std::visit(overloaded{
                 [&](const join_msg& m) {
                   auto j = b.initJoin();
                   j.setNode(m.node);
                   auto devs = j.initDevices(static_cast<unsigned>(m.devices.size()));
                   for (std::size_t i = 0; i < m.devices.size(); ++i) set_spec(devs[i], m.devices[i]);
                   j.setDataEndpoint(m.data_endpoint);
                 },
                 [&](const peers_msg& m) {
                   auto r = b.initPeers();
                   r.setGeneration(m.generation);
                   auto ps = r.initPeers(static_cast<unsigned>(m.peers.size()));
                   for (std::size_t i = 0; i < m.peers.size(); ++i) {
                     ps[i].setNode(m.peers[i].node);
                     ps[i].setEndpoint(m.peers[i].endpoint);
                     ps[i].setPublicKey(m.peers[i].public_key);
                     auto devs = ps[i].initDevices(static_cast<unsigned>(m.peers[i].devices.size()));
                     for (std::size_t k = 0; k < m.peers[i].devices.size(); ++k) devs.set(k, m.peers[i].devices[k]);
                   }
                 },
                 [&](const leave_msg& m) {
                   auto l = b.initLeave();
                   l.setNode(m.node);
                   auto devs = l.initDevices(static_cast<unsigned>(m.devices.size()));
                   for (std::size_t i = 0; i < m.devices.size(); ++i) devs.set(i, m.devices[i]);
                   l.setReason(m.reason);
                 },
                 [&](const heartbeat_msg& m) {
                   auto h = b.initHeartbeat();
                   h.setNode(m.node);
                   h.setTimeNs(m.time_ns);
                   h.setDataHash(m.data_hash);
                   h.setPeakRssMb(m.peak_rss_mb);
                   h.setLoading(m.loading);
                 },
                 [&](const fault_command& m) {
                   auto f = b.initFault();
                   f.setKind(static_cast<schema::FaultKind>(static_cast<std::uint16_t>(m.kind)));
                   f.setDevice(m.device);
                   f.setFactor(m.factor);
                   f.setDurationSteps(static_cast<std::uint32_t>(m.duration_steps));
                   f.setPeer(m.peer);
                   f.setDurationS(m.duration_s);
                 },
                 [&](const welcome_msg& m) {
                   auto w = b.initWelcome();
                   w.setAccepted(m.accepted);
                   w.setReason(m.reason);
                   auto devs = w.initDevices(static_cast<unsigned>(m.devices.size()));
                   for (std::size_t i = 0; i < m.devices.size(); ++i) devs.set(i, m.devices[i]);
                   w.setModel(m.model);
                   w.setSeed(m.seed);
                   w.setOptimizer(m.optimizer);
                   w.setLr(m.lr);
                   w.setMomentum(m.momentum);
                   w.setWeightDecay(m.weight_decay);
                   w.setNesterov(m.nesterov);
                   w.setSchedule(m.schedule.kind);
                   w.setWarmupSteps(m.schedule.warmup_steps);
                   w.setScheduleSteps(m.schedule.steps);
                   w.setStepSize(m.schedule.step_size);
                   w.setGamma(m.schedule.gamma);
                   w.setMinLr(m.schedule.min_lr);
                   w.setLabelSmoothing(m.label_smoothing);
                   w.setBf16(m.bf16);
                   w.setRejoin(m.rejoin);
                   w.setModelHash(m.model_hash);
                   w.setData(m.data);
                   w.setDataSamples(static_cast<std::uint32_t>(m.data_samples));
                   w.setDataHash(m.data_hash);
                 },
                 [&](const device_call& m) { write_call(b.initCall(), m); },
             },
             e.msg);
  auto words = capnp::messageToFlatArray(mb);
  auto bytes = words.asBytes();
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

result<envelope> decode(const std::uint8_t* data, std::size_t size, const decode_limits& lim) {
  if (size == 0 || data == nullptr) return make_error("empty", "empty message");
  if (size > lim.max_bytes)
    return make_error("too_large", "message of " + std::to_string(size) + " bytes exceeds the limit " + std::to_string(lim.max_bytes));
  if (size < 8) return make_error("truncated", "message of " + std::to_string(size) + " bytes is shorter than its header");
  // The segment table says how long the message must be: check before Cap'n Proto does.
  std::uint32_t count_minus_one;
  std::memcpy(&count_minus_one, data, 4);
  if (count_minus_one >= 512) return make_error("malformed", "segment table claims " + std::to_string(count_minus_one + 1ull) + " segments");
  const std::size_t segments = count_minus_one + 1;
  const std::size_t header_words = (segments + 2) / 2;
  if (size < header_words * 8) return make_error("truncated", "message ends inside its segment table");
  std::uint64_t body_words = 0;
  for (std::size_t s = 0; s < segments; ++s) {
    std::uint32_t w;
    std::memcpy(&w, data + 4 + 4 * s, 4);
    body_words += w;
  }
  const std::uint64_t expected = (header_words + body_words) * 8;
  if (size < expected)
    return make_error("truncated", "message is " + std::to_string(size) + " bytes but its header announces " + std::to_string(expected));
  if (size % 8 != 0) return make_error("malformed", "message size " + std::to_string(size) + " is not a multiple of 8");
  // Frames from the network may be unaligned: copy into words first.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(size / 8);
  std::memcpy(words.begin(), data, size);
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = lim.traversal_words;
  opts.nestingLimit = 16;
  try {
    capnp::FlatArrayMessageReader reader(words.asPtr(), opts);
    auto env = reader.getRoot<schema::Envelope>();
    envelope out;
    out.version = env.getVersion();
    if (out.version != protocol_version)
      return make_error("version", "protocol version " + std::to_string(out.version) + " is not this build's " + std::to_string(protocol_version));
    out.sender = text(env.getSender(), lim, "envelope.sender");
    out.seq = env.getSeq();
    out.msg = read_body(env, lim);
    if (auto s = validate_body(out.msg, lim); !s) return s.err();
    return out;
  } catch (const reject& r) {
    return make_error(r.code, r.message);
  } catch (const kj::Exception& e) {
    return make_error("malformed", std::string("not a valid envelope: ") + e.getDescription().cStr());
  }
}

}  // namespace dynapar::wire
