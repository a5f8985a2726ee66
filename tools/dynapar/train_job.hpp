// What `dynapar train`, `dynapar controller` and `dynapar launch` share: a job trained and
// written out (metrics.jsonl, plans.jsonl, summary.json, --verify). They differ only in where
// the devices live: `how` trains the prepared job (null: every device in this process).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "job_setup.hpp"

namespace dynapar::cli {

struct train_options {
  std::string job, out = "out/train";
  bool verify = false;
  std::int64_t steps = 0;
};

using train_fn = std::function<result<actors::train_outcome>(prepared_job&, const actors::train_callbacks&)>;

int train_main(const train_options& o, const train_fn& how);

}  // namespace dynapar::cli
