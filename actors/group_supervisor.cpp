#include "actors/group_supervisor.hpp"

#include <chrono>

#include "actors/device_actor.hpp"
#include "actors/messages.hpp"

namespace dynapar::actors {
namespace {
using clock = std::chrono::steady_clock;

struct supervisor_state {
  group_config cfg;
  std::vector<caf::actor> devices;
  group_report report;
  caf::actor report_to;
  int pending = 0;
  clock::time_point started;
  static inline const char* name = "group_supervisor";
};

caf::behavior group_supervisor(caf::stateful_actor<supervisor_state>* self, group_config cfg) {
  auto& s = self->state;
  s.cfg = std::move(cfg);
  for (std::size_t j = 0; j < s.cfg.devices.size(); ++j)
    s.devices.push_back(spawn_device(self, s.cfg.devices[j], s.cfg.optimizer, j < s.cfg.speeds.size() ? s.cfg.speeds[j] : 1.0));
  self->set_down_handler([=](const caf::down_msg& d) {
    auto& st = self->state;
    if (st.pending > 0) {
      st.report.error = "group " + std::to_string(st.cfg.group) + ": a device stopped (" + to_string(d.reason) + ")";
      st.pending = 0;
      self->send(st.report_to, st.report);
    }
  });
  // The state is gone when this runs: keep the handles themselves.
  self->attach_functor([devices = s.devices](const caf::error&) {
    for (const auto& d : devices) anon_send_exit(d, caf::exit_reason::user_shutdown);
  });
  return {
      [=](devices_atom) { return self->state.devices; },
      [=](step_atom, group_task& task) {
        auto& st = self->state;
        const int n = static_cast<int>(st.devices.size());
        const int m = static_cast<int>(task.inputs.size());
        const auto pipe = schedule::generate(st.cfg.schedule, n, m);
        st.report = group_report{};
        st.report.group = st.cfg.group;
        st.report.step = task.step;
        st.report_to = task.report_to;
        st.pending = n;
        st.started = clock::now();
        for (int j = 0; j < n; ++j) {
          stage_task t;
          t.step = task.step;
          t.program = pipe.programs[j];
          t.lo = st.cfg.splits[j];
          t.hi = st.cfg.splits[j + 1];
          if (j == 0) t.inputs = task.inputs;
          if (j == n - 1) t.targets = task.targets;
          if (j > 0) t.prev = st.devices[j - 1];
          if (j + 1 < n) t.next = st.devices[j + 1];
          t.report_to = caf::actor_cast<caf::actor>(self);
          self->send(st.devices[j], step_atom::value, std::move(t));
        }
      },
      [=](const stage_report& r) {
        auto& st = self->state;
        if (st.pending == 0) return;  // a late report of an abandoned step
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

caf::actor spawn_group(caf::actor_system& sys, const group_config& cfg) { return sys.spawn(group_supervisor, cfg); }

}  // namespace dynapar::actors
