// A device actor's state and the pieces its two files share (actors/device_actor.cpp: the
// stage program, layers and migration; actors/device_sum.cpp: the holders' sum). Internal to
// those two files.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "actors/device_actor.hpp"
#include "actors/device_clock.hpp"
#include "actors/gloo_lanes.hpp"
#include "actors/messages.hpp"
#include "model/device_sums.hpp"
#include "schedule/runner.hpp"

namespace dynapar::actors {

struct device_state {
  device_config cfg;
  std::unique_ptr<model::device_worker> worker;
  stage_task task;
  schedule::stage_runner runner;
  // Received activations and gradients by (step tag, micro-batch): a re-run of a step after a
  // failure has a new tag, so late messages of the abandoned attempt are never used.
  std::map<std::pair<std::int64_t, int>, model::tensor> acts, grads;
  // Who sent each (step tag, micro-batch, activation or not): checked against the task's
  // neighbours once the task is here. Refused: data from any other device, counted.
  std::map<std::tuple<std::int64_t, int, bool>, int> data_from;
  std::int64_t data_refused = 0;
  // Migrations announced to this device (expect_atom), (layer, giver) each taken once: a layer
  // from a device no migration names is refused and counted in data_refused.
  std::multiset<std::pair<int, int>> expected_layers;
  std::map<int, model::tensor> outputs, input_grads;
  model::tensor current;           // the input of the next forward
  stage_report report;
  bool active = false;
  bool told_forward = false;       // a probe's first forward was reported
  std::optional<stage_task> rest;  // a probe's rest that came before the probe ended
  std::chrono::steady_clock::time_point wait_since;
  // Its last update (a layer's sum applied): from then until the next step's task came, the
  // device waited on the controller (stage_report::idle_s).
  std::chrono::steady_clock::time_point updated_at;
  std::int64_t updated_step = -1;  // the training step of that update
  device_clock speed{1};                        // emulated speed, CPU- or profile-timed
  comm::link_shaper to_next, to_prev;          // this device's side of its pipeline links
  std::map<int, comm::link_shaper> migration;  // by target device
  std::map<int, std::size_t> held_bytes;       // layer -> its bytes with optimizer state
  // The holders' sum (model::device_sums owns its state), and what it answers through: by
  // bucket, the driver's promise and the holders' handles (the chunks' receivers, by rank);
  // the tasks that wait for this device's stage of their step to end; Gloo's communicators
  // (exact: false).
  model::device_sums sum{-1};
  struct sum_ticket {
    caf::response_promise done;
    std::vector<device_peer> peers;
  };
  std::map<int, sum_ticket> tickets;
  std::vector<std::pair<reduce_task, caf::response_promise>> deferred;
  std::unique_ptr<gloo_lanes> gloo;
  static inline const char* name = "device";
};

namespace device_detail {
// Its own messages besides: the delayed halves of a fault (self-sent).
using device_impl = device_handle::extend<caf::reacts_to<fail_atom>, caf::reacts_to<pause_atom, double>,
                                          caf::reacts_to<gloo_atom, std::int64_t, int, std::vector<model::tensor>, std::string>>;
using device_self = device_impl::stateful_pointer<device_state>;
using clock = std::chrono::steady_clock;
inline double since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }
inline double now_s() { return std::chrono::duration<double>(clock::now().time_since_epoch()).count(); }

// Sends over an emulated link: delivered when the shaper says the bytes have arrived.
template <class Handle, class... Ts>
void send_shaped(device_self self, comm::link_shaper& link, const comm::link_spec& spec,
                 const Handle& to, double bytes, Ts&&... xs) {
  const double now = now_s();
  const double delay = link.offer(spec, now, bytes) - now;
  if (delay <= 0) {
    self->send(to, std::forward<Ts>(xs)...);
  } else {
    self->delayed_send(to, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(delay)),
                       std::forward<Ts>(xs)...);
  }
}

// The holders' sum (device_sum.cpp).
// The optimizer step of a layer with its summed gradients, at the device's emulated speed.
// `scale`: clipping's factor (model::clip_scale; 1: none).
caf::result<applied> apply_sum(device_state& s, std::int64_t tag, int layer, const std::vector<model::tensor>& sum, double divisor,
                               double scale);
// The commit of bucket `layer`: its held sum applied to each of its layers.
caf::result<applied> commit_sum(device_state& s, std::int64_t tag, int layer, double divisor, double scale);
// A bucket's sum among its holders, once this device's partial sums of the step are final;
// `done` is answered when it holds the sum.
void start_reduce(device_self self, reduce_task t, caf::response_promise done);
// Another holder's chunk for the sum in progress of its layer: taken only from the device the
// sum's holders list at the rank it names; any other is refused, counted and said.
void sum_take(device_self self, reduce_part p);
// Gloo's all-reduce of a bucket came back (exact: false).
void gloo_done(device_self self, std::int64_t tag, int layer, const std::vector<model::tensor>& sum, const std::string& error);
// The sums that waited for this device's stage of the step that just ended.
void start_deferred(device_self self);

// Authority on the data plane (actors/device_data.cpp, docs/SECURITY.md): an activation
// (`activation`) or gradient of a step, sent by device `from`, is taken only from the
// neighbour the step's task names; one that comes before its task is kept with its sender
// and checked when the task comes (drop_unnamed_data). False: refused, counted and said.
bool take_data(device_state& s, std::int64_t tag, int micro, int from, bool activation);
// At a task's start: what came early from a device the task does not name is dropped.
void drop_unnamed_data(device_state& s);
// A migrating layer is taken only once announced by the controller (expect_atom), from the
// giver it named, each announcement once: any other is refused, counted and said.
bool expected_layer(device_state& s, const layer_transfer& x);

}  // namespace device_detail
}  // namespace dynapar::actors
