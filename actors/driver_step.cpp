// One attempt at a step (driver::run_step): the groups' pipelines with within-step dispatch,
// the exact gradient sum and the updates, measured for the controller. The layout and the
// attempt's bookkeeping are pure (runtime/step/); this file pumps them. The run around it is
// in driver_run.cpp.
#include "actors/driver.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "actors/group_supervisor.hpp"
#include "actors/messages.hpp"
#include "logging/logging.hpp"
#include "step/attempt.hpp"

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

// A sample's forward and backward over its forward, by the profile (3 without one): how a
// probe's first forward foretells its pace.
double work_over_fwd(const std::optional<planner::model_profile>& profile) {
  if (!profile) return 3;
  const planner::profile_sums sums(*profile);
  const int L = profile->num_layers();
  return sums.fwd(0, L) > 0 ? sums.work(0, L) / sums.fwd(0, L) : 3;
}

}  // namespace

void driver::add_micro_batch(group_task& task, const std::vector<int>& group, const data::dataset& d, const std::vector<int>& samples, int a,
                             int b, std::int64_t draw) const {
  const auto builds = [&](int id) { return actors_.remote && actors_.remote->builds_samples(id); };
  task.inputs.push_back(builds(group.front()) ? model::tensor{} : model::inputs(d, samples, a, b, draw));
  task.targets.push_back(builds(group.back()) ? model::tensor{} : model::targets(d, samples, a, b));
  task.samples.emplace_back(samples.begin() + a, samples.begin() + b);
}

void driver::send_slice(const step::slice& sl, const std::vector<int>& samples, std::int64_t t, bool resume) {
  const auto& gp = current_->groups[sl.group];
  group_task task;
  task.tag = attempt_.tag;
  task.train_step = t;
  task.first_micro = sl.first_micro;
  task.accumulate = !s_.exact;
  task.more = sl.more;
  task.resume = resume;
  task.report_to = caf::actor_cast<group_sink>(self_);  // the driver receives group_report
  for (std::size_t j = 0; j + 1 < gp.devices.size(); ++j) task.links.push_back(link(gp.devices[j], gp.devices[j + 1]));
  for (int a = sl.lo; a < sl.hi; a += gp.micro_batch) {
    add_micro_batch(task, gp.devices, d_, samples, a, std::min(sl.hi, a + gp.micro_batch), t);
  }
  // A node that builds this slice's inputs from files it decodes (images) decodes its place's
  // samples of the next step meanwhile, unless a re-plan may deal that step otherwise.
  const bool hint = d_.store && d_.store->decodes() && (replan_every_ <= 0 || (t + 1) % replan_every_ != 0);
  if (hint && actors_.remote && actors_.remote->builds_samples(gp.devices.front()) && attempt_.sampler && t + 1 < s_.steps) {
    const auto next = attempt_.sampler->step_samples(t + 1);
    task.ahead.assign(next.begin() + sl.lo, next.begin() + sl.hi);
  }
  self_->send(groups_[sl.group], step_atom::value, std::move(task));
}

// The pumps of the attempt: the groups' reports in, the rests' tasks and the sums' starts out,
// until every group has ended and every sum is held (or the attempt failed).
void driver::await_pipelines(step::attempt& at, reduction_work& work, const std::vector<int>& samples, std::int64_t t,
                             clock::time_point started, clock::time_point deadline) {
  auto on_down = [&](caf::down_msg& d) { note_down(d); };
  while ((!at.pipelines_done() || !work.done()) && failure_.empty())
    self_->receive(
        on_down,
        [&](const stage_report& r) {
          if (r.tag != attempt_.tag || !r.error.empty()) return;  // an abandoned attempt's; an error comes with its group's
          if (r.interim != 0) {  // a probe's progress (within-step dispatch)
            for (const auto& sl : at.interim(r.device, r.interim, r.compute_s, since(started))) send_slice(sl, samples, t, true);
            return;
          }
          for (int id : at.stage_done(r.device, since(started))) work.ready(id);
          if (faults_.waiting(sim::fault_moment::sum) && at.all_stages_done()) fire_armed(sim::fault_moment::sum, t, plan_devices(), 0.002);
        },
        [&](const group_report& r) {
          if (r.tag != attempt_.tag) return;  // an abandoned attempt's
          if (!r.error.empty()) failure_ = r.error;
          const std::vector<control::stage_figures> stages(r.stages.begin(), r.stages.end());
          for (int id : at.group_done(r.loss_sum, r.time_s, stages, since(started))) work.ready(id);
        },
        [&](device_gradients& g) { work.on(g); },
        [&](const sum_held& h) {
          if (h.tag == attempt_.tag) at.sum_held(h.device, static_cast<double>(h.bytes_in));
          work.on(h);
        },
        [&](caf::error& e) { failure_ = text(e); },
        caf::after(slice(deadline)) >> [&] { tick(started, deadline, at.pipelines_done() ? "adding gradients" : "the pipelines"); });
}

// The sums run in this process or among the holders' nodes; on the emulated cluster they would
// be rings over its links, a bucket's starting when its holders' backward has passed it: the
// time they would take beyond what ran here is slept.
void driver::emulate_sums(const step::attempt& at, clock::time_point started, training::step_record& rec) {
  if (emulated_sums_.stale) {
    emulated_sums_.segments = s_.profile ? cluster_.sums(*s_.profile, s_.batch, *current_, s_.overlap_sums) : std::vector<planner::sum_segment>{};
    emulated_sums_.stale = false;
  }
  const double pipelines_s = at.pipelines_s();
  const double sums_end_s = s_.overlap_sums ? planner::sums_end(emulated_sums_.segments, at.ready_by_stage()) : pipelines_s + planner::sums_end(emulated_sums_.segments, {});
  rec.sync_s = std::max(0.0, sums_end_s - pipelines_s);  // what the pipelines did not hide
  const double sleep_s = sums_end_s - since(started);
  if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
}

// After the sums, every holder's optimizer step (at its emulated speed). From here every live
// holder applies this step: a failure now leaves the survivors one step further (recover()
// knows, from the attempt's commit).
status driver::apply_step(step::attempt& at, reduction_work& work, std::int64_t t, clock::time_point started,
                          clock::time_point deadline, training::step_record& rec) {
  auto scale = clip_factor(work, m_, s_.optimizer.clip_grad_norm);
  if (!scale) return make_error(scale.err().code, "step " + std::to_string(t) + ", " + scale.err().message);
  const auto update_started = clock::now();
  at.commit(work.buckets());
  const int acks = work.apply(static_cast<double>(s_.batch), *scale);
  // Pipelined control: every holder takes the commit before the next step's task (both come
  // from here, the task through its group's supervisor or the same node connection), so the
  // next step may go out now, its devices starting as soon as they have applied this one.
  if (loop_ && loop_->may_start_early(t + 1, facts(t + 1))) {
    attempt_.early = start_attempt(t + 1, attempt_.sampler->step_samples(t + 1));
    if (faults_.waiting(sim::fault_moment::early)) fire_armed(sim::fault_moment::early, t, plan_devices(), 0.002);
  }
  auto on_down = [&](caf::down_msg& d) { note_down(d); };
  for (int k = 0; k < acks && failure_.empty();)
    self_->receive(on_down, [&](const applied& a) { k += at.applied(a.device, a.tag, a.layer); },
                   [&](caf::error& e) { failure_ = text(e); }, caf::after(slice(deadline)) >> [&] { tick(started, deadline, "applying gradients"); });
  if (auto st = check("step " + std::to_string(t)); !st) return st;
  // The ledger counts what the devices confirmed: every holder of every layer.
  if (const auto missing = unconfirmed(); !missing.empty())
    return make_error("unconfirmed", "step " + std::to_string(t) + ": device " + std::to_string(*missing.begin()) +
                                         " did not confirm applying its layers");
  rec.update_s = since(update_started);
  return ok_status();
}

driver::in_flight driver::start_attempt(std::int64_t t, const std::vector<int>& samples) {
  in_flight f;
  f.t = t;
  ++attempt_.tag;
  // The step's layout (step/layout.hpp) and its attempt, pumped here; over node processes too
  // (a probe's interim reports and its rest's task are on the wire since protocol 21).
  const step::layout_options lo{dispatches_, s_.dispatch_probe, s_.exact};
  const double fwd_ratio = lo.dispatch ? work_over_fwd(s_.profile) : 3;  // read only by a dispatch
  auto& at = f.at.emplace(attempt_.tag, *current_, step::make_layout(*current_, s_.batch, lo), paces_,
                          step::attempt_options{fwd_ratio, s_.overlap_sums});
  // The step's clock starts before its first task goes out: a device's pace is judged by the
  // time since its own task went out, which on a busy machine may be well after.
  f.started = clock::now();
  f.deadline = f.started + step_deadline();
  for (const auto& sl : at.shape().opening) {
    at.sent(sl.group, since(f.started));
    send_slice(sl, samples, t, false);
  }
  // Each layer: every holder's partial sums, added in the exact sum's fixed tree over the
  // step's micro-batches (in the order of the step's samples), by the holders themselves or
  // here (actors/reduction.hpp), divided by B and applied on every holder. A device's sums
  // start when its stage reports (overlapped with the other stages' backward), or when every
  // group has (overlap_sums off).
  const double clip = s_.optimizer.clip_grad_norm;
  f.work = reduction_->start({attempt_.tag, at.shape().micro_batches, &holders_, comm_generation_, clip > 0 ? static_cast<double>(s_.batch) : 0.0});
  // The next step's samples decode while this one runs, where this process builds the inputs
  // (a store that does not decode ignores the hint; nodes holding the data build their own).
  if (d_.store && !actors_.remote && attempt_.sampler && t + 1 < s_.steps) d_.store->ahead(attempt_.sampler->step_samples(t + 1), t + 1);
  return f;
}

status driver::run_step(std::int64_t t, const std::vector<int>& samples, training::step_record& rec, control::measurement& measure) {
  attempt_.last.reset();
  // Started with the step before's commit (pipelined control), or now.
  in_flight f = attempt_.early && attempt_.early->t == t ? std::move(*attempt_.early) : start_attempt(t, samples);
  attempt_.early.reset();
  auto& at = attempt_.last.emplace(std::move(*f.at));
  auto& work = f.work;
  const auto started = f.started, deadline = f.deadline;
  await_pipelines(at, *work, samples, t, started, deadline);
  for (const auto& [id, bytes] : at.sum_bytes()) out_.sum_received_bytes[id] += bytes;  // a failed attempt's too
  if (auto st = check("step " + std::to_string(t)); !st) return st;
  auto m = at.measure();
  measure.stages = std::move(m.stages);
  measure.links.insert(measure.links.end(), m.links.begin(), m.links.end());
  double wait = -1;  // the least wait of a device that updated in the step before
  rec.stages = at.stage_times();
  for (const auto& st : rec.stages)
    if (st.idle_s > 0 && (wait < 0 || st.idle_s < wait)) wait = st.idle_s;
  rec.controller_wait_s = std::max(0.0, wait);
  at.teach(paces_);
  if (auto st = work->finish(); !st) return make_error(st.err().code, "step " + std::to_string(t) + ", " + st.err().message);
  if (!at.may_commit(work->done())) return make_error("sums", "step " + std::to_string(t) + ": the sums did not all arrive");
  rec.pipeline_s = std::max(rec.pipeline_s, at.pipeline_s());
  emulate_sums(at, started, rec);
  if (auto st = apply_step(at, *work, t, started, deadline, rec); !st) return st;
  rec.loss = at.loss_sum() / s_.batch;
  rec.lr = lr_at(s_.optimizer.schedule, s_.optimizer.lr, t);
  return ok_status();
}

}  // namespace detail
}  // namespace dynapar::actors
