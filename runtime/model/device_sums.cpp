#include "model/device_sums.hpp"

#include <algorithm>

namespace dynapar::model {

sum_answer device_sums::failure(std::int64_t step, int layer, const std::string& why) const {
  return {step, layer, "device " + std::to_string(device_) + ", layer " + std::to_string(layer) + ": " + why, 0, {}};
}

// A task replaces what this device had of the bucket, and earlier attempts' early chunks go.
void device_sums::forget(const sum_task& t) {
  sums_.erase(t.layer);
  held_.erase(t.layer);
  gloo_.erase(t.layer);
  for (auto it = early_.begin(); it != early_.end();) it = it->first.first < t.step ? early_.erase(it) : std::next(it);
}

// The bucket's layers' partial sums joined into one list.
result<std::vector<grad_part>> device_sums::parts_of(const sum_task& t, const partials& mine, bucket& b) const {
  b.layers = t.layers.empty() ? std::vector<int>{t.layer} : t.layers;
  std::vector<std::vector<grad_part>> per_layer;
  for (int l : b.layers) {
    per_layer.push_back(mine(l));
    b.counts.push_back(per_layer.back().empty() ? 0 : per_layer.back().front().grads.size());
  }
  return join_layers(std::move(per_layer));
}

sum_answer device_sums::held_answer(std::int64_t step, int layer, const bucket& b, const std::vector<tensor>& sum, std::int64_t bytes_in,
                                    double norms_divisor) const {
  sum_answer a{step, layer, {}, bytes_in, {}};
  if (!(norms_divisor > 0)) return a;
  const auto all = grad_norms(sum, norms_divisor);  // the bucket's layers one after another
  std::size_t at = 0;
  for (const std::size_t n : b.counts) {
    const std::size_t lo = std::min(at, all.size()), hi = std::min(at + n, all.size());
    a.norms.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(lo), all.begin() + static_cast<std::ptrdiff_t>(hi));
    at += n;
  }
  return a;
}

// What peer_sum says to send; once the sum is complete it is held for the commit and answered.
void device_sums::progress(sum_out& out, result<std::vector<chunk_send>> sent) {
  auto it = sums_.find(out.layer);
  if (it == sums_.end()) return;
  auto& e = it->second;
  const auto fail = [&](const std::string& why) {
    out.answer = failure(out.step, out.layer, why);
    sums_.erase(it);
  };
  if (!sent) return fail(sent.err().message);
  for (auto& m : *sent) out.sends.push_back(std::move(m));
  if (!e.sum->done()) return;
  auto total = e.sum->sum();
  if (!total) return fail(total.err().message);
  out.answer = held_answer(e.task.step, out.layer, e.b, *total, e.bytes_in, e.task.norms_divisor);
  held_[out.layer] = {e.task.step, std::move(e.b), std::move(*total)};
  sums_.erase(it);
}

sum_out device_sums::start(const sum_task& t, const partials& mine) {
  forget(t);
  const auto me = std::find(t.holders.begin(), t.holders.end(), device_);
  if (me == t.holders.end()) return {t.step, t.layer, {}, failure(t.step, t.layer, "this device is not among the holders it was given"), {}};
  auto& e = sums_[t.layer];
  e.task = t;
  e.sum = std::make_unique<peer_sum>(static_cast<int>(me - t.holders.begin()), static_cast<int>(t.holders.size()), t.micro_batches, t.exact);
  sum_out out{t.step, t.layer, {}, {}, {}};
  auto parts = parts_of(t, mine, e.b);
  progress(out, parts ? e.sum->start(*parts) : result<std::vector<chunk_send>>(parts.err()));
  if (auto it = early_.find({t.step, t.layer}); it != early_.end()) {
    auto waiting = std::move(it->second);
    early_.erase(it);
    for (auto& [from, m] : waiting) {
      if (out.answer) break;  // ended (an error): the rest has nothing to add to
      auto more = take(t.step, t.layer, from, std::move(m));
      for (auto& s : more.sends) out.sends.push_back(std::move(s));
      out.refused.insert(out.refused.end(), more.refused.begin(), more.refused.end());
      if (more.answer) out.answer = std::move(more.answer);
    }
  }
  return out;
}

sum_out device_sums::take(std::int64_t step, int layer, int device, chunk_msg m) {
  sum_out out{step, layer, {}, {}, {}};
  auto it = sums_.find(layer);
  if (it == sums_.end() || it->second.task.step < step) {  // before its task
    early_[{step, layer}].emplace_back(device, std::move(m));
    return out;
  }
  auto& e = it->second;
  if (e.task.step > step) return out;  // an abandoned attempt's
  const auto& holders = e.task.holders;
  if (m.from < 0 || static_cast<std::size_t>(m.from) >= holders.size() || holders[static_cast<std::size_t>(m.from)] != device) {
    out.refused.emplace_back(device, m.from);
    return out;
  }
  for (const auto& part : m.parts) e.bytes_in += static_cast<std::int64_t>(bytes(part.grads));
  progress(out, e.sum->take(std::move(m)));
  return out;
}

result<flat_grads> device_sums::gloo_start(const sum_task& t, const partials& mine) {
  forget(t);
  const auto fail = [&](const std::string& why) { return make_error("sum_failed", failure(t.step, t.layer, why).error); };
  if (std::find(t.holders.begin(), t.holders.end(), device_) == t.holders.end())
    return fail("this device is not among the holders it was given");
  bucket b;
  auto parts = parts_of(t, mine, b);
  if (!parts) return fail(parts.err().message);
  auto flat = flatten(*parts);
  if (!flat) return fail(flat.err().message);
  const auto p = static_cast<double>(t.holders.size());
  gloo_[t.layer] = {t.step, std::move(b), static_cast<std::int64_t>(2 * (p - 1) / p * static_cast<double>(bytes(flat->flat))), t.norms_divisor};
  return flat;
}

std::optional<sum_answer> device_sums::gloo_done(std::int64_t step, int layer, const std::vector<tensor>& sum, const std::string& error) {
  auto it = gloo_.find(layer);
  if (it == gloo_.end() || it->second.step != step) return std::nullopt;  // an abandoned attempt's
  auto w = std::move(it->second);
  gloo_.erase(it);
  if (!error.empty()) return failure(step, layer, error);
  auto a = held_answer(step, layer, w.b, sum, w.bytes_in, w.norms_divisor);
  held_[layer] = {step, std::move(w.b), sum};
  return a;
}

result<std::vector<std::pair<int, std::vector<tensor>>>> device_sums::commit(std::int64_t step, int layer) {
  auto it = held_.find(layer);
  if (it == held_.end() || it->second.step != step)
    return make_error("sum_failed", "device " + std::to_string(device_) + " holds no sum of layer " + std::to_string(layer) + " for this step");
  auto h = std::move(it->second);
  held_.erase(it);
  auto per_layer = split_layers(std::move(h.sum), h.b.counts);
  if (!per_layer) return make_error("sum_failed", "device " + std::to_string(device_) + ": " + per_layer.err().message);
  std::vector<std::pair<int, std::vector<tensor>>> out;
  for (std::size_t i = 0; i < h.b.layers.size(); ++i) out.emplace_back(h.b.layers[i], std::move((*per_layer)[i]));
  return out;
}

}  // namespace dynapar::model
