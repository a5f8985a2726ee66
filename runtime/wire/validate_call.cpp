// Semantic checks of a device call: what each operation's struct cannot express by its types
// (counts that must match the tensor frames, places in the exact sum's tree, finite numbers).
#include <cmath>
#include <unordered_set>

#include "common/overloaded.hpp"
#include "wire/codec.hpp"
#include "wire/field_checks.hpp"

namespace dynapar::wire {
namespace {

using checks::bad;
using checks::finite_nonneg;
bool sha256_hex(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

constexpr std::int64_t max_tree_index = std::int64_t{1} << 40;
constexpr std::size_t max_parts = 128;  // a holder's partial sums: about log2 of its micro-batches
constexpr std::uint64_t max_delay_us = 3'600'000'000ull;  // a fault lands within the hour

status check_link(const ops::link& l, const std::string& field) {
  if (!finite_nonneg(l.bandwidth) || !finite_nonneg(l.latency)) return bad(field, "must have a finite bandwidth and latency >= 0");
  return ok_status();
}

status check_places(const std::vector<ops::tree_place>& ps, const std::string& field) {
  if (ps.size() > max_parts) return bad(field, "has more than " + std::to_string(max_parts) + " partial sums");
  for (const auto& p : ps)
    if (p.level > 62 || p.index > max_tree_index) return bad(field, "places a partial sum outside the tree");
  return ok_status();
}

status check_tensors(const device_call& m) {
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    const std::string where = "call.tensors[" + std::to_string(i) + "]";
    if (m.tensors[i].dtype > 5) return bad(where + ".dtype", "has an unknown value");
    if (m.tensors[i].shape.size() > 8) return bad(where + ".shape", "has more than 8 dimensions");
    for (auto d : m.tensors[i].shape)
      if (d < 0) return bad(where + ".shape", "has a negative size");
    if (!m.tensors[i].strides.empty() && m.tensors[i].strides.size() != m.tensors[i].shape.size())
      return bad(where + ".strides", "has " + std::to_string(m.tensors[i].strides.size()) + " strides for " +
                                         std::to_string(m.tensors[i].shape.size()) + " dimensions");
    for (auto s : m.tensors[i].strides)
      if (s < 0) return bad(where + ".strides", "has a negative stride");
  }
  return ok_status();
}

constexpr std::size_t element_bytes[] = {4, 8, 8, 4, 1, 2};  // dtype codes 0-5: f32, f64, i64, i32, u8, bf16
constexpr std::int64_t max_elements = std::int64_t{1} << 34;

status want_tensors(const device_call& m, std::size_t n, const std::string& op) {
  if (m.tensors.size() == n) return ok_status();
  return bad("call." + op, "needs " + std::to_string(n) + " tensors but the call announces " + std::to_string(m.tensors.size()));
}

status check_op(const device_call& m) {
  return std::visit(
      overloaded{
          [&](const ops::hold& x) -> status {
            if (x.from < -1 || x.to < -1) return bad("call.hold", "names a device below -1");
            if (x.built != 0 && (x.from != -1 || !x.layout.empty()))
              return bad("call.hold.built", "a layer built by the node is placed (from -1) and has no layout");
            if (!x.shard.empty() && (x.from != -1 || !x.layout.empty() || x.built != 0 || !m.tensors.empty() || !sha256_hex(x.shard_sha256)))
              return bad("call.hold.shard", "a layer read from a shard is placed (from -1), has no layout or tensors, and names the file's SHA-256");
            return ok_status();
          },
          [&](const ops::save_shard& x) -> status {
            if (x.path.empty() || x.path.front() == '/' || x.path.find("..") != std::string::npos)
              return bad("call.saveShard.path", "must be a shard's name inside the node's shard directory, not a path");
            return ok_status();
          },
          [&](const ops::shard_saved& x) -> status {
            if (x.error.empty() && !sha256_hex(x.sha256)) return bad("call.shardSaved.sha256", "must be 64 lowercase hex digits");
            return ok_status();
          },
          [&](const ops::expect& x) -> status {
            if (x.from < 0) return bad("call.expect.from", "must be a device id");
            return ok_status();
          },
          [&](const ops::migrate& x) -> status {
            if (x.to < 0) return bad("call.migrate.to", "must be a device id");
            return check_link(x.path, "call.migrate.link");
          },
          [&](const ops::speed& x) -> status {
            if (!(std::isfinite(x.factor) && x.factor > 0)) return bad("call.speed", "must be finite and > 0");
            return ok_status();
          },
          [&](const ops::probed& x) -> status {
            if (!finite_nonneg(x.seconds)) return bad("call.probed", "must be finite and >= 0");
            return ok_status();
          },
          [&](const ops::step& x) -> status {
            if (x.hi <= x.lo) return bad("call.step.endLayer", "must be greater than firstLayer");
            if (x.more && x.resume) return bad("call.step", "is both a probe (more) and a probe's rest (resume)");
            if (x.evaluate && (x.more || x.resume)) return bad("call.step", "is an evaluation and a probe or its rest");
            if (x.prev < -1 || x.next < -1) return bad("call.step", "names a neighbour below -1");
            if (static_cast<std::size_t>(x.inputs) + static_cast<std::size_t>(x.targets) != m.tensors.size())
              return bad("call.step", "input and target counts (" + std::to_string(x.inputs) + " + " + std::to_string(x.targets) +
                                          ") do not match the " + std::to_string(m.tensors.size()) + " tensors");
            for (const auto& in : x.program) {
              if (in.kind < 0 || in.kind >= ops::stage_op_count) return bad("call.step.program", "has an unknown instruction");
              if (in.micro < 0) return bad("call.step.program", "has a negative micro-batch");
            }
            if ((x.inputs_from_samples || x.targets_from_samples) && x.samples.empty())
              return bad("call.step.samples", "must list each micro-batch's samples when inputs or targets come from them");
            for (const auto& ids : x.samples) {
              if (ids.empty()) return bad("call.step.samples", "has a micro-batch without samples");
              for (int id : ids)
                if (id < 0) return bad("call.step.samples", "has a sample id below 0 (" + std::to_string(id) + ")");
            }
            for (int id : x.ahead)
              if (id < 0) return bad("call.step.aheadSamples", "has a sample id below 0 (" + std::to_string(id) + ")");
            if (auto s = check_link(x.to_prev, "call.step.toPrev"); !s) return s;
            return check_link(x.to_next, "call.step.toNext");
          },
          [&](const ops::activation& x) -> status {
            if (x.from < 0) return bad("call.activation.from", "must name the sending device");
            return want_tensors(m, 1, "activation");
          },
          [&](const ops::gradient& x) -> status {
            if (x.from < 0) return bad("call.gradient.from", "must name the sending device");
            return want_tensors(m, 1, "gradient");
          },
          [&](const ops::stage_report& x) -> status {
            if (!finite_nonneg(x.compute_s) || !finite_nonneg(x.wait_s) || !finite_nonneg(x.idle_s)) return bad("call.stageReport", "times must be finite and >= 0");
            if (!std::isfinite(x.loss_sum)) return bad("call.stageReport.lossSum", "must be finite");
            if (x.interim < 0 || x.interim > 2) return bad("call.stageReport.interim", "must be 0, 1 or 2");
            for (const auto& l : x.links)
              if (!finite_nonneg(l.bytes) || !finite_nonneg(l.busy_s)) return bad("call.stageReport.links", "must be finite and >= 0");
            return ok_status();
          },
          [&](const ops::gradient_set& x) -> status {
            std::size_t tensors = 0;
            for (const auto& l : x.layers) {
              if (auto s = check_places(l.parts, "call.gradientSet.layers.parts"); !s) return s;
              if (l.tensors_per_part > (1 << 20)) return bad("call.gradientSet.layers.tensorsPerPart", "is out of range");
              tensors += l.parts.size() * static_cast<std::size_t>(l.tensors_per_part);
            }
            if (tensors != m.tensors.size())
              return bad("call.gradientSet", "counts " + std::to_string(tensors) + " tensors but the call announces " +
                                                 std::to_string(m.tensors.size()));
            return ok_status();
          },
          [&](const ops::apply& x) -> status {
            if (!(std::isfinite(x.divisor) && x.divisor > 0)) return bad("call.apply.divisor", "must be finite and > 0");
            if (!(x.scale > 0 && x.scale <= 1)) return bad("call.apply.scale", "must be in (0, 1]");
            return ok_status();
          },
          [&](const ops::commit& x) -> status {
            if (!(std::isfinite(x.divisor) && x.divisor > 0)) return bad("call.commit.divisor", "must be finite and > 0");
            if (!(x.scale > 0 && x.scale <= 1)) return bad("call.commit.scale", "must be in (0, 1]");
            return ok_status();
          },
          [&](const ops::pause& x) -> status {
            if (!(std::isfinite(x.seconds) && x.seconds > 0 && x.seconds <= 3600)) return bad("call.pause.seconds", "must be in (0, 3600]");
            if (x.after_us > max_delay_us) return bad("call.pause.afterUs", "must be at most an hour");
            return ok_status();
          },
          [&](const ops::fail& x) -> status {
            if (x.after_us > max_delay_us) return bad("call.fail", "must be at most an hour");
            return ok_status();
          },
          [&](const ops::memory& x) -> status {
            if (!finite_nonneg(x.bytes)) return bad("call.memory", "must be finite and >= 0");
            return ok_status();
          },
          [&](const ops::timing& x) -> status {
            for (const auto& l : x.layers)
              for (double v : {l.forward_s, l.backward_s, l.fixed_s, l.update_s})
                if (!finite_nonneg(v)) return bad("call.timing", "must be finite and >= 0");
            return ok_status();
          },
          [&](const ops::reduce& x) -> status {
            if (x.micro_batches < 1 || x.micro_batches > max_tree_index) return bad("call.reduce.microBatches", "is out of range");
            if (x.holders.empty() || x.holders.size() > 4096) return bad("call.reduce.holders", "must name 1 to 4096 devices");
            std::unordered_set<int> seen;
            for (int h : x.holders) {
              if (h < 0) return bad("call.reduce.holders", "has a negative device id");
              if (!seen.insert(h).second) return bad("call.reduce.holders", "names device " + std::to_string(h) + " twice");
            }
            if (!x.store.empty() && x.exact) return bad("call.reduce.store", "Gloo adds in its own order: only for exact: false");
            if (!x.store.empty() && x.store.find(':') == std::string::npos) return bad("call.reduce.store", "must be HOST:PORT");
            if (!x.layers.empty() && x.layers.front() != x.layer) return bad("call.reduce.layers", "must begin with call.reduce.layer");
            if (!finite_nonneg(x.norms_divisor)) return bad("call.reduce.normsDivisor", "must be finite and >= 0");
            for (std::size_t i = 1; i < x.layers.size(); ++i)
              if (x.layers[i] <= x.layers[i - 1]) return bad("call.reduce.layers", "must be ascending, each layer once");
            return ok_status();
          },
          [&](const ops::reduce_part& x) -> status {
            if (x.device < 0) return bad("call.reducePart.device", "must be the sending device's id");
            if (auto s = check_places(x.parts, "call.reducePart.parts"); !s) return s;
            return want_tensors(m, x.parts.size(), "reducePart");
          },
          [&](const auto&) { return ok_status(); },
      },
      m.op);
}

}  // namespace

status validate_call(const device_call& m) {
  if (auto s = check_tensors(m); !s) return s;
  return check_op(m);
}

status check_tensor_frames(const device_call& c, const std::vector<std::size_t>& frame_bytes) {
  if (frame_bytes.size() != c.tensors.size())
    return make_error("malformed", "the message announces " + std::to_string(c.tensors.size()) + " tensors but carries " +
                                       std::to_string(frame_bytes.size()) + " data frames");
  if (auto st = check_tensors(c); !st) return st;
  for (std::size_t i = 0; i < c.tensors.size(); ++i) {
    const auto& t = c.tensors[i];
    std::int64_t n = 1, far = 0;
    for (std::size_t k = 0; k < t.shape.size(); ++k) {
      const auto d = t.shape[k];
      if (d > 0 && n > max_elements / d) return bad("call.tensors[" + std::to_string(i) + "].shape", "has more than 2^34 elements");
      n *= d;
      if (t.strides.empty() || d <= 1) continue;
      if (t.strides[k] > (max_elements - far) / (d - 1)) return bad("call.tensors[" + std::to_string(i) + "].strides", "reach past 2^34 elements");
      far += (d - 1) * t.strides[k];
    }
    // A view's frame holds the span its strides reach (model::tensor_meta).
    if (!t.strides.empty() && n > 0) n = far + 1;
    const auto want = static_cast<std::size_t>(n) * element_bytes[c.tensors[i].dtype];
    if (want != frame_bytes[i])
      return make_error("malformed", "tensor " + std::to_string(i) + ": its shape needs " + std::to_string(want) +
                                         " bytes but its frame has " + std::to_string(frame_bytes[i]));
  }
  return ok_status();
}

}  // namespace dynapar::wire
