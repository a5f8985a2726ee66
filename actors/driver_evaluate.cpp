// The validation set's metric, computed where the layers are (issue 50): forward-only tasks
// through the groups' pipelines, whose last stages score their chunks; the driver adds the
// scores up. No layer comes here for it, and over nodes that hold the job's data only sample
// ids travel.
#include <algorithm>

#include "actors/driver.hpp"
#include "step/evaluation.hpp"

namespace dynapar::actors::detail {

result<double> driver::evaluate(const data::dataset& test, std::int64_t t, const char* what) {
  const auto& groups = current_->groups;
  const std::size_t G = groups.size();
  std::vector<double> shares;
  for (const auto& g : groups) shares.push_back(g.share);
  step::evaluation_deal deal(test.size(), model::evaluation_chunk, shares);
  std::vector<std::int64_t> tag(G, -1);  // of each group's task in flight
  std::vector<clock::time_point> due(G, clock::time_point::max());
  const auto started = clock::now();
  int running = 0;
  auto send = [&](std::size_t g) {
    const auto chunks = deal.next(g);
    if (chunks.empty()) return;
    const auto& gp = groups[g];
    group_task task;
    task.tag = ++attempt_.tag;
    task.train_step = -1;  // no augmentation, no dropout
    task.evaluate = true;
    task.report_to = caf::actor_cast<group_sink>(self_);
    for (std::size_t j = 0; j + 1 < gp.devices.size(); ++j) task.links.push_back(link(gp.devices[j], gp.devices[j + 1]));
    double samples = 0;
    for (const auto& ids : chunks) {
      add_micro_batch(task, gp.devices, test, ids, 0, static_cast<int>(ids.size()), -1);
      samples += static_cast<double>(ids.size());
    }
    // A task's samples go forward only: a third of a step's work for each batch of them. A
    // step's deadline for each such third is ample.
    const double thirds = std::max(1.0, samples / std::max(1, s_.batch) / 3);
    due[g] = clock::now() + std::chrono::duration_cast<clock::duration>(step_deadline() * thirds);
    tag[g] = task.tag;
    ++running;
    self_->send(groups_[g], step_atom::value, std::move(task));
  };
  for (std::size_t g = 0; g < G; ++g) send(g);
  if (faults_.waiting(sim::fault_moment::evaluation)) fire_armed(sim::fault_moment::evaluation, t, plan_devices(), 0.002);
  double sum = 0;
  auto on_down = [&](caf::down_msg& d) { note_down(d); };
  while (running > 0 && failure_.empty()) {
    const auto deadline = *std::min_element(due.begin(), due.end());
    self_->receive(
        on_down, [](const stage_report&) {},  // the group's report says it all
        [&](const group_report& r) {
          for (std::size_t g = 0; g < G; ++g) {
            if (tag[g] != r.tag) continue;
            if (!r.error.empty()) failure_ = r.error;
            sum += r.loss_sum;
            tag[g] = -1;
            due[g] = clock::time_point::max();
            --running;
            if (failure_.empty()) send(g);
          }
        },
        [&](caf::error& e) { failure_ = text(e); }, caf::after(slice(deadline)) >> [&] { tick(started, deadline, what); });
  }
  if (auto st = check(what); !st) return st.err();
  return model::metric_of(sum, test);
}

}  // namespace dynapar::actors::detail
