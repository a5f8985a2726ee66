// What a run's settings must hold before its first step, given its data set's size and its
// model's layers: errors as values naming the setting (the driver refuses the run with them).
#pragma once

#include "common/result.hpp"
#include "training/settings.hpp"

namespace dynapar::training {

status check_run(const train_settings& s, int samples, int layers);

}  // namespace dynapar::training
