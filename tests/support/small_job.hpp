// The small job the training tests start from (prepare_test.cpp changes it field by field;
// prepare_fuzz_test.cpp mutates it): quick to prepare, with a fixed plan.
#pragma once

namespace dynapar::test_support {

// Four devices at relative speeds 4:2:1:1 on synthetic data (600 samples, batch 64).
inline const char* const base_job = R"(name: prep
model: mlp
data: synthetic
synthetic_samples: 600
batch: 64
micro_batch: 16
epochs: 2
optimizer: {kind: sgd, lr: 0.05, momentum: 0.5}
policy: dp_even
seed: 7
emulate_cores: 1
devices:
  - {id: 0, speed: 4, memory_gb: 4, price_per_hour: 360, node: 0}
  - {id: 1, speed: 2, memory_gb: 4, price_per_hour: 120, node: 0}
  - {id: 2, speed: 1, memory_gb: 4, price_per_hour: 36, node: 1}
  - {id: 3, speed: 1, memory_gb: 4, price_per_hour: 36, node: 1}
)";

}  // namespace dynapar::test_support
