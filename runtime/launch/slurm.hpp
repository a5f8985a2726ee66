// A `dynapar node` started by Slurm's srun: which of the job's devices this task hosts, its
// name, from the SLURM_* variables, and the controller's address file (docs/CLUSTERS.md). The
// environment is passed in, so tests need no Slurm.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::launch {

struct slurm_task {
  int procid = 0, ntasks = 1, localid = 0;  // SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
  std::string job, step;                    // SLURM_JOB_ID, SLURM_STEP_ID
};

// Looks a variable up: its value, or nothing where it is not set.
using env_lookup = std::function<std::optional<std::string>(const std::string&)>;
env_lookup process_env();

// The task srun started, or an error naming the variable that is missing or malformed
// (outside srun, SLURM_PROCID is not set).
result<slurm_task> read_slurm_task(const env_lookup& env);

struct slurm_devices {
  int base = 0;      // --device-base: the first device id of this allocation
  int per_task = 1;  // --devices-per-task
};

// Task p hosts devices base + p * per_task .. base + (p + 1) * per_task - 1: one allocation
// hosts a contiguous range, and a second allocation joins with a base past the first's.
std::vector<int> task_devices(const slurm_task& t, const slurm_devices& d);

// A name unique across allocations and steps: slurm-JOB.STEP-PROCID.
std::string task_name(const slurm_task& t);

// The address a node dials to reach a controller bound at `endpoint` (tcp://HOST:PORT, as
// ZeroMQ reports it): a wildcard host (0.0.0.0, *, ::) is replaced by `host`, this machine's.
result<std::string> advertised_endpoint(const std::string& endpoint, const std::string& host);

// Writes `text` to `path` whole or not at all (a temporary file, then a rename), so a reader
// polling for the file never sees half of it.
status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace dynapar::launch
