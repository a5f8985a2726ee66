#include "node_devices.hpp"

#include "common/memory_peak.hpp"
#include "logging/logging.hpp"

namespace dynapar::cli {
namespace {

// --slurm: this srun task's devices (--device-base, --devices-per-task) and its name unless
// --name (its key: DIR/device-ID.key, ID its first device, as for any node).
// With --devices auto, the task describes --devices-per-task devices (auto:K: K) instead.
status apply_slurm(node_options& o, const launch::env_lookup& env) {
  if (!o.devices.empty()) return make_error("bad_flag", "--slurm picks this task's devices: drop --device (or --slurm)");
  auto task = launch::read_slurm_task(env);
  if (!task) return task.err();
  if (o.node.name.empty()) o.node.name = launch::task_name(*task);
  const auto log = logging::get("node");
  if (!o.described.empty()) {
    if (o.described == "auto") o.described += ":" + std::to_string(o.slurm_devices.per_task);
    log->info("slurm task {} of {} (job {}, step {}): devices {}", task->procid, task->ntasks, task->job, task->step, o.described);
    return ok_status();
  }
  const auto ids = launch::task_devices(*task, o.slurm_devices);
  for (int id : ids) o.devices.push_back(std::to_string(id));
  log->info("slurm task {} of {} (job {}, step {}): devices {}..{}", task->procid, task->ntasks, task->job, task->step, ids.front(),
            ids.back());
  return ok_status();
}

// --devices auto[:K]: K devices (default 1) that the controller numbers from the job's free
// ones, each described with its memory: --memory-gb, else the host's available memory shared
// among them (a CPU place; this build cannot ask a GPU).
result<std::vector<planner::device_spec>> describe_devices(const std::string& spec, double memory_gb, const std::string& place) {
  int k = 1;
  if (spec.rfind("auto:", 0) == 0) {
    const auto n = spec.substr(5);
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1)
      return make_error("bad_flag", "--devices '" + spec + "': expected auto or auto:K, K from 1 to 9999");
    k = std::stoi(n);
  } else if (spec != "auto") {
    return make_error("bad_flag", "--devices '" + spec + "': expected auto or auto:K (or name the job's devices with --device ID)");
  }
  double bytes = memory_gb * 1e9;
  if (bytes <= 0) {
    if (place != "cpu") return make_error("bad_flag", "--devices auto on " + place + ": say each device's memory with --memory-gb");
    bytes = available_memory_mb() * 1e6 / k;
    if (!(bytes > 0)) return make_error("bad_flag", "--devices auto: /proc/meminfo does not say the memory available; give --memory-gb");
  }
  std::vector<planner::device_spec> out(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i) {
    out[i].id = -1;
    out[i].name = "auto-" + std::to_string(i);
    out[i].memory_bytes = bytes;
  }
  return out;
}

// --device ID or ID:NAME. Speeds, prices and links come from the job: the node names which
// of the job's devices it hosts.
result<std::vector<planner::device_spec>> parse_devices(const std::vector<std::string>& specs) {
  std::vector<planner::device_spec> out;
  for (const auto& s : specs) {
    const auto colon = s.find(':');
    const auto id = s.substr(0, colon);
    if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos)
      return make_error("bad_device", "--device '" + s + "': expected a device id of the job (ID or ID:NAME)");
    planner::device_spec d;
    d.id = std::stoi(id);
    d.name = colon == std::string::npos ? "device-" + id : s.substr(colon + 1);
    out.push_back(d);
  }
  return out;
}

}  // namespace

result<std::vector<planner::device_spec>> node_devices(node_options& o, const launch::env_lookup& env) {
  if (!o.described.empty() && !o.devices.empty()) return make_error("bad_flag", "--devices auto and --device: give one or the other");
  if (o.memory_gb > 0 && o.described.empty()) return make_error("bad_flag", "--memory-gb describes --devices auto; the job says the rest");
  if (!o.described.empty() && o.leave) return make_error("bad_flag", "--leave needs the --device ids to retire");
  if (o.slurm)
    if (auto st = apply_slurm(o, env); !st) return st.err();
  if (o.devices.empty() && o.described.empty())
    return make_error("bad_flag", "name the devices this node hosts: --device ID or --devices auto (or --slurm under srun)");
  return o.described.empty() ? parse_devices(o.devices) : describe_devices(o.described, o.memory_gb, o.node.place);
}

}  // namespace dynapar::cli
