// Runs training: a device actor per device, a group supervisor per plan group, optionally a
// controller actor re-planning online, and this driver, which feeds each group its share of
// every step, sums each layer's gradients across the groups holding it (divided by the batch)
// and has every holder apply them. Between steps it applies plan changes as diffs (layers move
// device to device with their optimizer state), and it plays the emulated cluster's dynamics
// (speeds, links, prices, joins and leaves, slot by slot). No CAF or torch in this header.
#pragma once

#include "common/result.hpp"
#include "data/dataset.hpp"
#include "model/api.hpp"
#include "training/records.hpp"
#include "training/settings.hpp"

namespace dynapar::actors {

result<training::train_outcome> train(const model::model_chain& m, const data::dataset& train_data,
                                      const training::train_settings& s, const training::train_callbacks& callbacks = {});

}  // namespace dynapar::actors
