// Semantic checks of decoded messages: what Cap'n Proto's structure cannot express.
#include <cmath>
#include <unordered_set>

#include "common/overloaded.hpp"
#include "wire/codec.hpp"
#include "wire/field_checks.hpp"

namespace dynapar::wire {
namespace {

using checks::bad;
using checks::finite_nonneg;

status check_spec(const planner::device_spec& d, const std::string& where) {
  if (!(std::isfinite(d.speed) && d.speed > 0)) return bad(where + ".speed", "must be finite and > 0");
  if (!(std::isfinite(d.memory_bytes) && d.memory_bytes > 0)) return bad(where + ".memoryBytes", "must be finite and > 0");
  if (!finite_nonneg(d.price_per_s)) return bad(where + ".pricePerS", "must be finite and >= 0");
  if (!finite_nonneg(d.power_w)) return bad(where + ".powerW", "must be finite and >= 0");
  if (!(d.nic_bw > 0)) return bad(where + ".nicBw", "must be > 0 (0 on the wire means unlimited)");
  return ok_status();
}

}  // namespace

status validate_body(const body& b, const decode_limits& /*lists were bounded on decode*/) {
  return std::visit(
      overloaded{
          [&](const join_msg& m) -> status {
            if (m.node.empty()) return bad("join.node", "must not be empty");
            if (m.devices.empty()) return bad("join.devices", "must not be empty");
            std::unordered_set<int> ids;
            for (std::size_t i = 0; i < m.devices.size(); ++i) {
              const std::string where = "join.devices[" + std::to_string(i) + "]";
              // -1: any free device of the job's (a node that describes itself, `--devices auto`).
              if (m.devices[i].id < -1) return bad(where + ".id", "must be a device id or -1 (any)");
              if (m.devices[i].id >= 0 && !ids.insert(m.devices[i].id).second)
                return bad(where + ".id", "repeats id " + std::to_string(m.devices[i].id));
              if (auto s = check_spec(m.devices[i], where); !s) return s;
            }
            if (!m.data_endpoint.empty() && m.data_endpoint.rfind("tcp://", 0) != 0)
              return bad("join.dataEndpoint", "must be tcp://HOST:PORT");
            return ok_status();
          },
          [&](const peers_msg& m) -> status {
            std::unordered_set<int> ids;
            std::unordered_set<std::string> names;
            for (std::size_t i = 0; i < m.peers.size(); ++i) {
              const auto& p = m.peers[i];
              const std::string where = "peers.peers[" + std::to_string(i) + "]";
              if (p.node.empty()) return bad(where + ".node", "must not be empty");
              if (!names.insert(p.node).second) return bad(where + ".node", "repeats node '" + p.node + "'");
              if (p.endpoint.rfind("tcp://", 0) != 0) return bad(where + ".endpoint", "must be tcp://HOST:PORT");
              if (!p.public_key.empty() && p.public_key.size() != 40) return bad(where + ".publicKey", "must be empty or 40 Z85 characters");
              for (int d : p.devices)
                if (!ids.insert(d).second) return bad(where + ".devices", "repeats device " + std::to_string(d) + " (one node hosts a device)");
            }
            return ok_status();
          },
          [&](const leave_msg& m) -> status {
            if (m.node.empty()) return bad("leave.node", "must not be empty");
            return ok_status();
          },
          [&](const heartbeat_msg& m) -> status {
            if (m.node.empty()) return bad("heartbeat.node", "must not be empty");
            if (!(std::isfinite(m.peak_rss_mb) && m.peak_rss_mb >= 0 && m.peak_rss_mb < 1e9))
              return bad("heartbeat.peakRssMb", "must be finite, >= 0 and < 1e9");
            return ok_status();
          },
          [&](const fault_command& m) -> status {
            if (m.kind == fault_kind::slow && !(std::isfinite(m.factor) && m.factor > 0 && m.factor <= 1))
              return bad("fault.factor", "must be in (0, 1] for a slow-down");
            if (m.kind == fault_kind::partition && m.peer == m.device)
              return bad("fault.peer", "must name another device, or be -1 (the device's node cut off from all)");
            if (m.duration_steps < 0) return bad("fault.durationSteps", "must be >= 0");
            if ((m.kind == fault_kind::pause || m.kind == fault_kind::partition) &&
                !(std::isfinite(m.duration_s) && m.duration_s > 0 && m.duration_s <= 3600))
              return bad("fault.durationS", "must be in (0, 3600] seconds for a pause or partition");
            return ok_status();
          },
          [&](const welcome_msg& m) -> status {
            if (m.accepted && m.devices.empty()) return bad("welcome.devices", "must not be empty when accepted");
            if (m.accepted && m.model.empty()) return bad("welcome.model", "must not be empty when accepted");
            for (auto [name, v] : {std::pair{"welcome.lr", m.lr}, std::pair{"welcome.momentum", m.momentum},
                                   std::pair{"welcome.weightDecay", m.weight_decay}})
              if (!finite_nonneg(v)) return bad(name, "must be finite and >= 0");
            if (!m.model_hash.empty() &&
                (m.model_hash.size() != 64 || m.model_hash.find_first_not_of("0123456789abcdef") != std::string::npos))
              return bad("welcome.modelHash", "must be empty or 64 lower-case hex digits (SHA-256)");
            if (m.data_samples < 0) return bad("welcome.dataSamples", "must be >= 0");
            return ok_status();
          },
          [&](const device_call& m) { return validate_call(m); },
      },
      b);
}

}  // namespace dynapar::wire
