// One attempt at a step (driver::run_step): the groups' pipelines with within-step dispatch
// (probe_plan), the exact gradient sum and the updates, measured for the controller. The run
// around it is in driver_run.cpp.
#include "actors/driver.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "actors/group_supervisor.hpp"
#include "actors/messages.hpp"
#include "logging/logging.hpp"
#include "schedule/dispatch.hpp"

namespace dynapar::actors {
namespace detail {
namespace {

// Clipping by global norm: every parameter's gradient norm in layer order (each layer's first
// param_count of its sum's norms), as the reference gathers them, and the factor they give.
result<double> clip_factor(const reduction_work& work, const model::model_chain& m, double max_norm) {
  if (!(max_norm > 0)) return 1.0;
  const auto by_layer = work.norms();
  std::vector<float> all;
  for (int l = 0; l < model::num_layers(m); ++l) {
    const auto it = by_layer.find(l);
    const std::size_t n = model::param_count(m, l);
    if (it == by_layer.end() || it->second.size() < n)
      return make_error("no_norms", "clipping: the gradient norms of layer " + std::to_string(l) + " did not come back");
    all.insert(all.end(), it->second.begin(), it->second.begin() + static_cast<std::ptrdiff_t>(n));
  }
  const double scale = model::clip_scale(all, max_norm);
  // NaN or infinite gradients: PyTorch would scale by NaN and spoil every weight; say so.
  if (!(scale > 0 && scale <= 1)) return make_error("bad_gradients", "clipping: the gradients' global norm is not finite");
  return scale;
}

}  // namespace

driver::probe_layout driver::probe_plan() const {
  probe_layout out;
  out.samples.assign(current_->groups.size(), 0);
  // The devices' interim reports and the rest's task are not on the wire to node processes.
  if (!dispatches_ || actors_.remote) return out;
  // Exact: the pool's units are whole micro-batches, so that every sample keeps its leaf.
  for (const auto& gp : current_->groups)
    if (s_.exact && gp.devices.size() == 1) out.unit = std::max(out.unit, gp.micro_batch);
  std::vector<int> eligible;  // single-device groups' shares (exact: of whole units)
  for (const auto& gp : current_->groups)
    eligible.push_back(gp.devices.size() == 1 && (!s_.exact || gp.micro_batch == out.unit) ? gp.share : 0);
  out.samples = schedule::probes(eligible, s_.dispatch_probe, out.unit);
  if (s_.profile) {
    const int L = s_.profile->num_layers();
    const planner::profile_sums sums(*s_.profile);
    if (sums.fwd(0, L) > 0) out.work_over_fwd = sums.work(0, L) / sums.fwd(0, L);
  }
  return out;
}

status driver::run_step(std::int64_t t, const std::vector<int>& samples, training::step_record& rec, control::measurement& measure) {
  ++tag_;
  committed_ = false;
  // Every group gets a contiguous slice of the step's samples, cut into micro-batches
  // numbered in sample order (the exact sum's leaves). With within-step dispatch, single-device
  // groups first take their probes, the other groups their shares, and the rest of the
  // samples is a pool handed out when the first probe ends.
  const auto probes = probe_plan();
  const std::size_t G = groups_.size();
  // The step's clock starts before its first task goes out: a device's pace is judged by the
  // time since its own task went out (`started_s`), which on a busy machine may be well after.
  const auto started = clock::now(), deadline = started + step_deadline();
  std::vector<schedule::probe_progress> progress(G);
  std::int64_t micro_batches = 0;  // of the step, over all groups
  int cursor = 0;
  auto task_for = [&](std::size_t g, int lo, int hi, std::int64_t first_micro) {
    const auto& gp = current_->groups[g];
    group_task task;
    task.step = tag_;
    task.train_step = t;
    task.first_micro = first_micro;
    task.accumulate = !s_.exact;
    task.report_to = caf::actor_cast<group_sink>(self_);  // the driver receives group_report
    for (std::size_t j = 0; j + 1 < gp.devices.size(); ++j) task.links.push_back(link(gp.devices[j], gp.devices[j + 1]));
    for (int a = lo; a < hi; a += gp.micro_batch) {
      const int b = std::min(hi, a + gp.micro_batch);
      task.inputs.push_back(model::inputs(d_, samples, a, b, t));
      task.targets.push_back(model::targets(d_, samples, a, b));
      task.samples.emplace_back(samples.begin() + a, samples.begin() + b);
    }
    return task;
  };
  auto start = [&](std::size_t g, int lo, int hi, bool more) {
    auto task = task_for(g, lo, hi, micro_batches);
    micro_batches += static_cast<std::int64_t>(task.inputs.size());
    task.more = more;
    progress[g].started_s = since(started);
    self_->send(groups_[g], step_atom::value, std::move(task));
  };
  for (std::size_t g = 0; g < G; ++g)
    if (probes.samples[g] > 0) {
      start(g, cursor, cursor + probes.samples[g], true);
      cursor += probes.samples[g];
    }
  for (std::size_t g = 0; g < G; ++g)
    if (probes.samples[g] == 0) {
      start(g, cursor, cursor + current_->groups[g].share, false);
      cursor += current_->groups[g].share;
    }
  const int pool = s_.batch - cursor, pool_at = cursor;
  const std::int64_t pool_micro = micro_batches;
  if (pool > 0) micro_batches += (pool + probes.unit - 1) / probes.unit;  // exact: the pool's units are micro-batches
  for (std::size_t g = 0; g < G; ++g) {
    progress[g].prior_s = paces_.prior(current_->groups[g].devices[0]);
    progress[g].samples = probes.samples[g];
    progress[g].first_samples = std::min(probes.samples[g], current_->groups[g].micro_batch);
  }
  std::vector<int> rest(G, -1);  // samples of the pool by group, once dispatched
  auto taker = [&](int device) -> int {  // the probing group of a device (-1: none)
    for (std::size_t g = 0; g < G; ++g)
      if (probes.samples[g] > 0 && current_->groups[g].devices[0] == device) return static_cast<int>(g);
    return -1;
  };
  // A probe's rest goes out at once; a device still running its probe keeps it until then.
  auto send_rest = [&](std::size_t g) {
    int lo = pool_at;
    for (std::size_t h = 0; h < g; ++h) lo += std::max(0, rest[h]);
    auto task = task_for(g, lo, lo + rest[g], pool_micro + (lo - pool_at) / probes.unit);
    task.resume = true;
    self_->send(groups_[g], step_atom::value, std::move(task));
  };
  auto dispatch = [&](double now) {
    std::vector<std::size_t> takers;
    std::vector<schedule::prospect> prospects;
    for (std::size_t g = 0; g < G; ++g)
      if (probes.samples[g] > 0) {
        takers.push_back(g);
        prospects.push_back(schedule::prospect_of(progress[g], now, probes.work_over_fwd, paces_.trust()));
      }
    const auto given = schedule::dispatch_samples(prospects, pool, probes.unit);
    for (std::size_t k = 0; k < takers.size(); ++k) rest[takers[k]] = given[k];
    for (std::size_t g : takers) send_rest(g);
  };
  // Each layer: every holder's partial sums, added in the exact sum's fixed tree over the
  // step's micro-batches (in the order of the step's samples), by the holders themselves or
  // here (actors/reduction.hpp), divided by B and applied on every holder. A device's sums
  // start when its stage reports (overlapped with the other stages' backward), or when every
  // group has (overlap_sums off).
  const double clip = s_.optimizer.clip_grad_norm;
  auto work = reduction_->start({tag_, micro_batches, &holders_, comm_generation_, clip > 0 ? static_cast<double>(s_.batch) : 0.0});
  double loss_sum = 0, pipelines_s = 0;
  std::vector<std::pair<int, double>> compute_s;  // by device
  std::map<int, double> ready_s;                  // by device: its stage's report, from the start
  auto on_down = [&](caf::down_msg& d) { note_down(d); };
  for (std::size_t k = 0; (k < groups_.size() || !work->done()) && failure_.empty();)
    self_->receive(
        on_down,
        [&](const stage_report& r) {
          if (r.step != tag_ || !r.error.empty()) return;  // an abandoned attempt's; an error comes with its group's
          if (r.interim != 0) {  // a probe's progress (within-step dispatch)
            const int g = taker(r.device);
            if (g < 0) return;
            if (r.interim == 1) progress[g].forward_s = r.compute_s;
            if (r.interim != 2) return;
            progress[g].done_s = since(started);
            progress[g].compute_s = r.compute_s;
            if (rest[g] < 0) dispatch(progress[g].done_s);
            return;
          }
          ready_s[r.device] = since(started);
          if (s_.overlap_sums) work->ready(r.device);
          if (!armed_.empty() && ready_s.size() == plan_devices().size())  // every sum under way
            fire_armed(sim::fault_moment::sum, t, plan_devices(), 0.002);
        },
        [&](const group_report& r) {
          if (r.step != tag_) return;  // an abandoned attempt's
          if (!r.error.empty()) failure_ = r.error;
          loss_sum += r.loss_sum;
          rec.pipeline_s = std::max(rec.pipeline_s, r.time_s);
          for (const auto& st : r.stages) {
            rec.stages.push_back({st.device, st.compute_s, st.wait_s, st.messages});
            compute_s.emplace_back(st.device, st.compute_s);
            measure.links.insert(measure.links.end(), st.links.begin(), st.links.end());
          }
          if (++k < groups_.size()) return;
          pipelines_s = since(started);
          if (!s_.overlap_sums)
            for (const auto& [id, at] : ready_s) work->ready(id);
        },
        [&](device_gradients& g) { work->on(g); },
        [&](const sum_held& h) {
          if (h.step == tag_) out_.sum_received_bytes[h.device] += static_cast<double>(h.bytes_in);
          work->on(h);
        },
        [&](caf::error& e) { failure_ = text(e); },
        caf::after(slice(deadline)) >> [&] { tick(started, deadline, k < groups_.size() ? "the pipelines" : "adding gradients"); });
  if (auto st = check("step " + std::to_string(t)); !st) return st;
  measure.stages = control::stages_of(*current_, compute_s);
  for (auto& st : measure.stages)  // dispatched: what each probe's device ran in all
    if (const int g = taker(st.device); g >= 0) {
      const int u = current_->groups[g].micro_batch;
      st.samples = probes.samples[g] + rest[g];
      st.micro_batches = (probes.samples[g] + u - 1) / u + (rest[g] + u - 1) / u;
    }
  for (auto& st : rec.stages)
    for (const auto& ms : measure.stages)
      if (ms.device == st.device) st.samples = static_cast<int>(ms.samples);
  // What the probes and the priors foretold of the rests, for the next steps' trust.
  for (const auto& [id, c] : compute_s)
    if (const int g = taker(id); g >= 0 && rest[g] > 0 && c > progress[g].compute_s)
      paces_.observe(id, progress[g].compute_s / probes.samples[g], (c - progress[g].compute_s) / rest[g]);
  if (auto st = work->finish(); !st) return make_error(st.err().code, "step " + std::to_string(t) + ", " + st.err().message);
  if (sync_stale_) {
    // The sums run in this process or among the holders' nodes; on the emulated cluster they
    // would be rings over its links, a bucket's starting when its holders' backward has
    // passed it: the time they would take beyond what ran here is slept.
    sums_ = s_.profile ? cluster_.sums(*s_.profile, s_.batch, *current_, s_.overlap_sums) : std::vector<planner::sum_segment>{};
    sync_stale_ = false;
  }
  std::vector<std::vector<double>> ready;  // by group and stage
  for (const auto& gp : current_->groups) {
    ready.emplace_back();
    for (int id : gp.devices) ready.back().push_back(ready_s[id]);
  }
  const double sums_end_s = s_.overlap_sums ? planner::sums_end(sums_, ready) : pipelines_s + planner::sums_end(sums_, {});
  rec.sync_s = std::max(0.0, sums_end_s - pipelines_s);  // what the pipelines did not hide
  const double sleep_s = sums_end_s - since(started);
  if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  // After the sums, every holder's optimizer step (at its emulated speed). From here every
  // live holder applies this step: a failure now leaves the survivors one step further
  // (recover() knows, from committed_).
  auto scale = clip_factor(*work, m_, clip);
  if (!scale) return make_error(scale.err().code, "step " + std::to_string(t) + ", " + scale.err().message);
  const auto update_started = clock::now();
  committed_ = true;
  confirmed_.begin(tag_, work->buckets());
  const int acks = work->apply(static_cast<double>(s_.batch), *scale);
  for (int k = 0; k < acks && failure_.empty();)
    self_->receive(on_down, [&](const applied& a) { k += confirmed_.confirm(a.device, a.step, a.layer); },
                   [&](caf::error& e) { failure_ = text(e); }, caf::after(slice(deadline)) >> [&] { tick(started, deadline, "applying gradients"); });
  if (auto st = check("step " + std::to_string(t)); !st) return st;
  // The ledger counts what the devices confirmed: every holder of every layer.
  if (const auto missing = unconfirmed(); !missing.empty())
    return make_error("unconfirmed", "step " + std::to_string(t) + ": device " + std::to_string(*missing.begin()) +
                                         " did not confirm applying its layers");
  rec.update_s = since(update_started);
  rec.loss = loss_sum / s_.batch;
  rec.lr = lr_at(s_.optimizer.schedule, s_.optimizer.lr, t);
  return ok_status();
}

}  // namespace detail
}  // namespace dynapar::actors
