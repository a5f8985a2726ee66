#include "actors/group_supervisor.hpp"

#include <chrono>
#include <map>

#include "actors/messages.hpp"

namespace dynapar::actors {
namespace {
using clock = std::chrono::steady_clock;

struct supervisor_state {
  group_config cfg;
  group_report report;
  group_sink report_to;
  int pending = 0;
  clock::time_point started;
  // The stages' programs by micro-batch count (a probe and its rest differ from a share), each
  // generated once: a supervisor lives as long as its group's plan.
  std::map<std::pair<int, bool>, schedule::pipeline> programs;  // by (count, evaluation)
  static inline const char* name = "group_supervisor";
};

group_handle::behavior_type group_supervisor(group_handle::stateful_pointer<supervisor_state> self, group_config cfg) {
  auto& s = self->state;
  s.cfg = std::move(cfg);
  for (const auto& d : s.cfg.actors) self->monitor(d);
  self->set_down_handler([=](const caf::down_msg& d) {
    auto& st = self->state;
    if (st.pending > 0) {
      st.report.error = "group " + std::to_string(st.cfg.group) + ": a device stopped (" + to_string(d.reason) + ")";
      st.pending = 0;
      self->send(st.report_to, st.report);
    }
  });
  return {
      [=](step_atom, group_task& task) {
        auto& st = self->state;
        const int n = static_cast<int>(st.cfg.actors.size());
        const int m = static_cast<int>(task.inputs.size());
        auto it = st.programs.find({m, task.evaluate});
        if (it == st.programs.end())
          it = st.programs
                   .emplace(std::make_pair(m, task.evaluate),
                            task.evaluate ? schedule::forward_only(n, m) : schedule::generate(st.cfg.schedule, n, m))
                   .first;
        const auto& pipe = it->second;
        if (task.resume) {  // a probe's rest (one device): the step in progress goes on
          if (n != 1 || st.pending == 0 || task.tag != st.report.tag) return;
        } else {
          st.report = group_report{};
          st.report.group = st.cfg.group;
          st.report.tag = task.tag;
          st.report_to = task.report_to;
          st.pending = n;
          st.started = clock::now();
        }
        for (int j = 0; j < n; ++j) {
          stage_task t;
          static_cast<step::stage_work&>(t) = task;
          if (j > 0 && j < n - 1) t.samples.clear();
          if (j > 0) t.ahead.clear();  // for the stage that reads the inputs
          t.program = pipe.programs[j];
          t.lo = st.cfg.splits[j];
          t.hi = st.cfg.splits[j + 1];
          if (j == 0) t.inputs = task.inputs;
          if (j == n - 1) t.targets = task.targets;
          if (j > 0) {
            t.prev = st.cfg.actors[j - 1];
            t.prev_id = st.cfg.devices[j - 1];
            if (j - 1 < static_cast<int>(task.links.size())) t.to_prev = task.links[j - 1];
          }
          if (j + 1 < n) {
            t.next = st.cfg.actors[j + 1];
            t.next_id = st.cfg.devices[j + 1];
            if (j < static_cast<int>(task.links.size())) t.to_next = task.links[j];
          }
          t.report_to = caf::actor_cast<group_handle>(self);
          t.more = task.more && n == 1;
          self->send(st.cfg.actors[j], step_atom::value, std::move(t));
        }
      },
      [=](const stage_report& r) {
        auto& st = self->state;
        if (st.pending == 0 || r.tag != st.report.tag) return;  // a late report of an abandoned step
        self->send(st.report_to, r);
        if (r.interim != 0 && r.error.empty()) return;  // a probe's progress: the stage goes on
        st.report.stages.push_back(r);
        st.report.loss_sum += r.loss_sum;
        if (!r.error.empty() && st.report.error.empty()) st.report.error = r.error;
        if (--st.pending == 0) {
          st.report.time_s = std::chrono::duration<double>(clock::now() - st.started).count();
          self->send(st.report_to, st.report);
        }
      },
  };
}
}  // namespace

group_handle spawn_group(caf::actor_system& sys, const group_config& cfg) { return sys.spawn(group_supervisor, cfg); }

}  // namespace dynapar::actors
