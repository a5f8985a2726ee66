// The training driver's class (actors/trainer.hpp describes what it does), implemented in
// driver_run.cpp (a pump of the run's loop, runtime/control/run_loop.*), driver_step.cpp (one
// attempt at a step), driver_plans.cpp (membership and plan changes; their order is
// runtime/planner/migration.*) and driver_faults.cpp (crash recovery, faults struck, replica
// checks, idle devices' probes; the recovery decision is runtime/control/recovery.*, the fault
// plan as it unfolds runtime/sim/fault_schedule.*).
// Internal: only those files include it.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "actors/group_supervisor.hpp"
#include "actors/messages.hpp"
#include "actors/reduction.hpp"
#include "actors/session.hpp"
#include "actors/trainer.hpp"
#include "control/confirmations.hpp"
#include "control/membership.hpp"
#include "control/run_loop.hpp"
#include "data/ledger.hpp"
#include "data/sampler.hpp"
#include "planner/cluster.hpp"
#include "schedule/dispatch.hpp"
#include "step/attempt.hpp"
#include "sim/emulated_cluster.hpp"
#include "sim/fault_schedule.hpp"
#include "training/run_checks.hpp"
#include "training/run_tally.hpp"

namespace dynapar::actors::detail {

using clock = std::chrono::steady_clock;

inline std::string text(const caf::error& e) { return to_string(e); }
inline double since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

// Without an emulated cluster: every device the plans or the caller name, at full speed, on
// one node.
sim::scenario default_emulation(const training::train_settings& s, const cluster_actors& a);
// Whether the controller's policy uses within-step dispatch (planner::policy::dispatches);
// true without a controller.
bool policy_dispatches(const training::train_settings& s);
// How the holders add: at the step's start, in buckets of the model's layers.
peer_options peer_options_of(const model::model_chain& m, const training::train_settings& s);

class driver {
 public:
  driver(caf::actor_system& sys, cluster_actors& actors, const model::model_chain& m, const data::dataset& d,
         const training::train_settings& s, const training::train_callbacks& cb)
      : sys_(sys), self_(sys), actors_(actors), m_(m), d_(d), s_(s), cb_(cb), L_(model::num_layers(m)),
        timeout_(std::chrono::milliseconds(static_cast<long>(s.step_timeout_s * 1000))),
        cluster_(s.emulated.cluster.devices.empty() ? default_emulation(s, actors) : s.emulated),
        reduction_(s.peer_sum ? peer_reduction(self_, actors.devices, s.exact, peer_options_of(m, s)) : central_reduction(self_, actors.devices, s.exact)),
        dispatches_(s.dispatch_probe > 0 && policy_dispatches(s)) {}

  ~driver() { shutdown(); }

  result<training::train_outcome> run();

 private:
  status check(const std::string& where) {
    if (failure_.empty()) return ok_status();
    auto e = make_error(timing_.late ? "deadline" : "step_failed", where + ": " + failure_);
    failure_.clear();
    timing_.late = false;
    return e;
  }
  // Waits within a step end at its deadline (a hung device is found by the probes after it).
  static std::chrono::milliseconds left(clock::time_point deadline) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    return std::max(ms, std::chrono::milliseconds(0));
  }
  void missed(clock::time_point started, const char* what) {
    failure_ = std::string(what) + " missed the step deadline (" + std::to_string(since(started)).substr(0, 5) + " s)";
    timing_.late = true;
  }
  // Waits in a step wake up at least every 100 ms: with node processes, to notice a lost
  // node at once even when no message of the step would tell (a stage already done, its peers
  // waiting); and always because CAF restarts a receive's timeout on any message it skips,
  // such as an answered request's timeout arriving late (the calls between steps wait the
  // step deadline, so theirs land in a later step): a wait of the whole deadline would end
  // up to a deadline late.
  std::chrono::milliseconds slice(clock::time_point deadline) const {
    return std::min(left(deadline), std::chrono::milliseconds(100));
  }
  void tick(clock::time_point started, clock::time_point deadline, const char* what) {
    if (clock::now() >= deadline) return missed(started, what);
    if (!actors_.remote) return;
    for (const auto& g : current_->groups)
      for (int id : g.devices)
        if (actors_.remote->lost(id) && failure_.empty())
          failure_ = std::string(what) + ": device " + std::to_string(id) + "'s node is lost";
  }
  clock::duration step_deadline() const;
  comm::link_spec link(int a, int b) const {
    const auto [bw, lat] = cluster_.link(a, b);
    return {bw, lat};
  }
  // What a joining device's speed is taken to be: its probe against the driver's (the same
  // CPU work); on a job with GPUs, the speed measured on the model at set-up (a matrix probe
  // says little about a GPU against a CPU).
  double announced_speed(int id, double probe_s) const {
    if (!s_.places.empty() && s_.controller)
      for (const auto& d : s_.controller->core.cluster.devices)
        if (d.id == id) return d.speed;
    return bench_ref_s_ / probe_s;
  }
  std::string place_of(int id) const {
    const auto it = s_.places.find(id);
    return it == s_.places.end() ? "cpu" : it->second;
  }
  // The run (driver_run.cpp): the job's checks, the loop's cadences (a resumed run's ledger
  // filled), one step with its figures, the end's work and the outcome's averages.
  control::run_cadence start_run(data::sample_ledger& ledger, data::global_sampler& sampler);
  struct run_totals {
    training::run_tally tally;
    bool replanned = false;  // the step's plan changed
    clock::time_point opened, last_end = clock::now();  // the step's start, the last step's end
    // An attempt at a step opens: its record, and its time (an early one's from the step
    // before's end).
    void open(const control::run_command& c, training::step_record& rec) {
      rec = {};
      rec.step = c.step;
      opened = c.early ? last_end : clock::now();
      replanned = false;
    }
  };
  status step_once(const control::run_command& c, training::step_record& rec, run_totals& totals, data::global_sampler& sampler,
                   data::sample_ledger& ledger);
  status evaluate_epoch(std::int64_t t, const data::global_sampler& sampler);
  training::train_outcome outcome(const run_totals& totals, const data::sample_ledger& ledger, data::global_sampler& sampler);
  // What the run's loop cannot know between steps (control::run_facts), before step `next`.
  control::run_facts facts(std::int64_t next) const;
  // A replica nudged after its step (train_settings::perturb: tests of the replica check).
  status perturb() {
    if (const auto& p = s_.perturb; holders_.count(p.layer) && p.group < static_cast<int>(holders_[p.layer].size()))
      self_->send(actors_.devices.at(holders_[p.layer][p.group]), perturb_atom::value, p.layer);
    return ok_status();
  }
  status enter_slot(std::int64_t slot, bool& changed);
  // Devices that became available join, those gone depart (part of entering a slot).
  status update_membership(std::int64_t slot, bool& changed);
  // Devices the plan in force leaves idle are probed again, and the controller told their
  // speed: no step measures them, and a speed learnt before they went idle may be stale
  // (docs/RUNTIME.md, "Idle devices").
  void reprobe_idle();
  // With every device lost (a whole cluster crashed at once), or too few left to hold the
  // model: waits up to rejoin_wait_s for replacements to join (respawned nodes, or in one
  // process fresh actors).
  status await_devices(std::int64_t slot, std::int64_t t, bool& changed, const std::string& why);
  // The plan for step t: a change only where `replan` (the loop's: due, or forced).
  result<std::optional<control::decision>> next_plan(std::int64_t t, bool replan);
  status apply(const control::decision& decision, std::int64_t t, std::int64_t slot, training::step_record& rec);
  // Drops layers and waits until every device answered (the first error, or empty).
  std::string drop_layers(const std::vector<std::pair<int, int>>& drops);
  double move_layers(const std::vector<planner::layer_move>& moves, std::int64_t t);
  status retire(std::int64_t t, std::int64_t slot);
  // Announced departure: the device keeps serving its layers until a plan without it has
  // moved them away (retire).
  void depart(int id) {
    if (actors_.controller) self_->send(actors_.controller, leave_atom::value, id);
    members_.depart(id);
    ++out_.leaves;
  }
  // A node asked to leave: its devices depart before the next step, not at the next slot. A
  // lost node's devices are dead instead (recovered from, before the step).
  bool remote_departures() {
    if (!actors_.remote) return false;
    std::vector<int> gone;
    for (int id : members_.joined_ids()) {
      if (actors_.remote->lost(id)) members_.stopped(id);  // a crash: recovered, not a leave
      else if (!actors_.remote->present(id)) gone.push_back(id);
    }
    for (int id : gone) depart(id);
    return !gone.empty();
  }
  // One attempt at step t (driver_step.cpp): its tasks, the pumps of its step::attempt, the
  // emulated sums and the holders' updates.
  void send_slice(const step::slice& sl, const std::vector<int>& samples, std::int64_t t, bool resume);
  // Samples [a, b) of `samples` as a micro-batch of `task`, for a group of `group`'s devices:
  // their ids, and their inputs and targets unless the group's first (last) device builds
  // them from the ids itself (a node holding the data set: remote_devices::builds_samples),
  // which leaves those null. `draw` seeds augmentation (-1: none).
  void add_micro_batch(group_task& task, const std::vector<int>& group, const data::dataset& d, const std::vector<int>& samples, int a, int b,
                       std::int64_t draw) const;
  void await_pipelines(step::attempt& at, reduction_work& work, const std::vector<int>& samples, std::int64_t t,
                       clock::time_point started, clock::time_point deadline);
  void emulate_sums(const step::attempt& at, clock::time_point started, training::step_record& rec);
  status apply_step(step::attempt& at, reduction_work& work, std::int64_t t, clock::time_point started, clock::time_point deadline,
                    training::step_record& rec);
  status run_step(std::int64_t t, const std::vector<int>& samples, training::step_record& rec, control::measurement& measure);
  // An attempt at step t in flight: its opening tasks sent and its sums started.
  struct in_flight {
    std::int64_t t = -1;
    std::optional<step::attempt> at;
    std::unique_ptr<reduction_work> work;
    clock::time_point started, deadline;
  };
  in_flight start_attempt(std::int64_t t, const std::vector<int>& samples);
  // Every replica's hash of every layer; those on one place must agree. `all`: where each
  // replica's hash goes, by layer (the end's check, for --verify).
  status check_replicas(std::int64_t t, std::vector<std::vector<training::train_outcome::replica_hash>>* all = nullptr);
  // One copy of each layer from its first holder, waiting at most `wait`.
  void request_layers(std::vector<model::layer_copy>& out, std::chrono::milliseconds wait, const char* what);
  // Each layer's first holder writes its checkpoint shard into `dir`. False: a shard was not
  // written, or this process does not see it (no shared filesystem), and the layers are to be
  // gathered instead; a lost holder leaves its error in failure_.
  bool save_shards(std::vector<training::shard_file>& out, const std::string& dir, std::chrono::milliseconds wait, std::int64_t t);
  // A layer a cycle of moves stages (apply): written by its holder `from` as a shard in the
  // step's shard directory, which its targets read, so nothing of it passes through here; or,
  // where no shard can be (no directory, no filesystem shared with the nodes), a copy here.
  using staged_layer = std::variant<model::layer_copy, training::shard_file>;
  // `bytes`: the layer's, as written or copied. `dir`: the step's shard directory, asked for
  // once per re-plan (asking again empties it).
  staged_layer stage_layer(int from, int layer, std::int64_t t, double& bytes, std::string& dir);
  // The first plan's layers: fresh, or a resumed run's (shards or copies). A shard is read and
  // a fresh layer built where it is placed (over nodes a fresh layer goes as a null copy,
  // which the node builds from the model and seed, checked by hash): those are asked for all
  // at once, so that the devices build or read in parallel;
  // whole copies go one at a time. A failure is left in failure_.
  void place_first(const std::vector<planner::layer_move>& moves);
  // Each staged layer to its move's target; then the staged shards' files go.
  void place_staged(const std::vector<std::pair<planner::layer_move, staged_layer>>& staged);
  // A device of this process, with the model's layers to read checkpoint shards with (not
  // owned: m_ outlives the run's actors).
  device_config local_device(int id) const {
    device_config cfg{id, s_.optimizer, cluster_.true_speed(id), 0, place_of(id)};
    cfg.layers = std::make_shared<const model::layer_source>(
        model::layer_source::of(std::shared_ptr<const model::model_chain>(std::shared_ptr<void>(), &m_)));
    return cfg;
  }
  // Each layer from its first holder in turn, in `form` (train_settings::final_form).
  void collect_layers(std::vector<model::layer_copy>& out, std::vector<std::uint64_t>& hashes,
                      training::train_settings::final_form form, std::chrono::milliseconds wait, const char* what);
  std::chrono::milliseconds between_steps() const;
  // The validation set's metric (model::metric_of), from forward-only tasks through the plan's
  // groups (driver_evaluate.cpp); an error: a device failed or missed its deadline meanwhile.
  // `t`: the last step done (an armed fault's record).
  result<double> evaluate(const data::dataset& test, std::int64_t t, const char* what);
  status finish_run(std::int64_t steps);
  void answer_failed(const caf::error& e, clock::time_point started, const char* what);
  status take_checkpoint(std::int64_t steps_done);
  // A device actor stopped: fatal for the step in flight if the plan uses it.
  void note_down(const caf::down_msg& d, bool fatal = true) {
    for (const auto& [id, a] : actors_.devices)
      if (a && a.address() == d.source) {
        members_.stopped(id);
        for (const auto& g : current_ && fatal ? current_->groups : std::vector<planner::group_plan>{})
          if (std::count(g.devices.begin(), g.devices.end(), id) && failure_.empty())
            failure_ = "device " + std::to_string(id) + " stopped (" + to_string(d.reason) + ")";
      }
  }
  std::set<int> find_lost();
  // Probes the devices all at once: the seconds of each that answered within `timeout`.
  std::map<int, double> probe_all(const std::vector<int>& ids, std::chrono::milliseconds timeout);
  // The faults due at step t (the job's plan, `dynapar inject`), and slow-downs that end.
  void fire_faults(std::int64_t t);
  // Armed kills waiting for moment `m` (sim::fault_moment), on one of `among`, within window_s.
  void fire_armed(sim::fault_moment m, std::int64_t t, const std::vector<int>& among, double window_s);
  void strike(const sim::fault& f, const char* source, std::int64_t t, std::vector<int> among, double window_s, const char* when);
  // An armed `joining` kill, on device `id` while it joins (before its benchmark).
  void strike_joining(int id, std::int64_t t);
  std::vector<int> plan_devices() const;
  void note(const training::fault_record& r) {
    if (cb_.on_fault) cb_.on_fault(r);
  }
  std::set<int> unconfirmed() const;
  // `committed`: the failed attempt at step t had reached its apply phase. Where the run goes
  // on, and whether it re-plans (not a late attempt's retry).
  struct resumed { std::int64_t step = 0; bool replans = false; };
  result<resumed> recover(std::int64_t t, bool committed, const error& why, data::sample_ledger& ledger, data::global_sampler& sampler);
  void drain_stale();
  void shutdown() {
    for (auto& g : groups_) self_->send_exit(g, caf::exit_reason::user_shutdown);
    groups_.clear();
    for (auto& [id, a] : actors_.devices) self_->send_exit(a, caf::exit_reason::user_shutdown);
    actors_.devices.clear();
    if (actors_.controller) self_->send_exit(actors_.controller, caf::exit_reason::user_shutdown);
    actors_.controller = controller_actor{};
  }

  caf::actor_system& sys_;
  caf::scoped_actor self_;
  cluster_actors& actors_;
  const model::model_chain& m_;
  const data::dataset& d_;
  const training::train_settings& s_;
  const training::train_callbacks& cb_;
  const int L_;
  const std::chrono::milliseconds timeout_;
  sim::emulated_cluster cluster_;                 // what devices and links really are
  std::unique_ptr<gradient_reduction> reduction_;  // where a step's gradients are added
  const bool dispatches_;                         // within-step dispatch (step/layout.hpp)
  schedule::pace_noise paces_;                    // dispatched devices' priors and the trust in probes
  control::membership members_;                   // joined, leaving, failing, dead, wiped
  double bench_ref_s_ = 0;                        // this machine's time for the benchmark
  std::optional<planner::plan> current_;
  double predicted_s_ = 0, queue_ = 0;            // of the controller's latest decision
  std::vector<group_handle> groups_;
  std::map<int, std::vector<int>> holders_;       // layer -> device ids, plan order
  std::string failure_;
  training::train_outcome out_;
  int replan_every_ = 0;
  // The emulated sums depend on the plan and the slot's links only: computed once per change,
  // not every step.
  struct {
    std::vector<planner::sum_segment> segments;
    bool stale = true;
  } emulated_sums_;
  std::int64_t first_slot_ = 0;                   // of this run (a resumed run starts late)
  std::optional<control::run_loop> loop_;         // the run's loop between steps (run())
  // Faults (docs/RELIABILITY.md). Each attempt at a step has its own tag, so that messages of
  // an abandoned attempt are never taken for the re-run's.
  // The last attempt stays until the next begins: recover() reads whether it committed and
  // which holders confirmed its apply phase.
  struct {
    std::int64_t tag = 0;
    std::optional<step::attempt> last;
    // Pipelined control: the next step, started with the last one's commit, and the run's
    // sampler (run()), which names its samples.
    std::optional<in_flight> early;
    data::global_sampler* sampler = nullptr;
  } attempt_;
  std::int64_t comm_generation_ = 0;              // reduce_task::generation: moves on with plans and failures
  struct {
    training::checkpoint cut;                     // where to roll back when a layer loses every replica
    training::checkpoint fresh;                   // layers the next first plan places (none: the model's)
    // A shard this process did not see as its holder wrote it (no filesystem shared with the
    // nodes): the rest of the run gathers, rather than leave a copy on a node's disk each time.
    bool shards_unseen = false;
    std::vector<double> seconds;                  // each recovery's
    // Since the lost devices were known (after the probes): closed when the next step starts.
    std::optional<clock::time_point> since;
    std::string how;
  } recovery_;
  // The step deadline (step_deadline) and when an injected fault lands.
  struct {
    double last_step_s = 0.05;
    double last_pipeline_s = 0.05;                // the last step's pipelines: when an injected hang lands
    double mean_step_s = 0;                       // recent steps (for the automatic deadline)
    // Consecutive attempts of one step that missed the deadline with every device answering:
    // each doubles the next attempt's deadline (a slow-down counted in steps would otherwise
    // never end, its step re-running forever); too many stop the run.
    int late_retries = 0;
    bool late = false;                            // the failure was a missed deadline
  } timing_;
  sim::fault_schedule faults_;                    // the job's faults as they unfold (and their randomness)
};

}  // namespace dynapar::actors::detail
