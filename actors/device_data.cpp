// A device's side of authority on the data plane (docs/SECURITY.md): a step's activations and
// gradients only from the neighbours its task names, a migrating layer only as announced.
#include "actors/device_state.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors::device_detail {
namespace {

// Data from a device the task does not name as its neighbour: dropped, counted and said; the
// step goes on waiting for the neighbour's.
void refuse(device_state& s, bool activation, int from, int want) {
  ++s.data_refused;
  logging::get("device")->warn("device {}: dropped {} of step {} from device {}; its task takes it from device {} ({} refused)", s.cfg.id,
                               activation ? "an activation" : "a gradient", s.task.tag, from, want, s.data_refused);
}

int neighbour(const device_state& s, bool activation) { return activation ? s.task.prev_id : s.task.next_id; }

}  // namespace

bool take_data(device_state& s, std::int64_t tag, int micro, int from, bool activation) {
  if (tag == s.task.tag && s.active && from != neighbour(s, activation)) {
    refuse(s, activation, from, neighbour(s, activation));
    return false;
  }
  s.data_from[{tag, micro, activation}] = from;
  return true;
}

void drop_unnamed_data(device_state& s) {
  for (auto it = s.data_from.begin(); it != s.data_from.end();) {
    const auto [tag, micro, activation] = it->first;
    const bool unnamed = tag == s.task.tag && it->second != neighbour(s, activation);
    if (unnamed) {
      refuse(s, activation, it->second, neighbour(s, activation));
      (activation ? s.acts : s.grads).erase({tag, micro});
    }
    it = tag < s.task.tag || unnamed ? s.data_from.erase(it) : std::next(it);
  }
}

bool expected_layer(device_state& s, const layer_transfer& x) {
  if (auto it = s.expected_layers.find({x.layer, x.from}); it != s.expected_layers.end()) {
    s.expected_layers.erase(it);
    return true;
  }
  ++s.data_refused;
  logging::get("device")->warn("device {}: refused layer {} from device {}: no migration of it was announced ({} refused)", s.cfg.id, x.layer,
                               x.from, s.data_refused);
  return false;
}

}  // namespace dynapar::actors::device_detail
