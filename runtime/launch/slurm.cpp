#include "launch/slurm.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace dynapar::launch {
namespace {

// A whole non-negative decimal number that fits an int, or -1.
int whole(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(s);
}

}  // namespace

env_lookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

result<slurm_task> read_slurm_task(const env_lookup& env) {
  slurm_task t;
  const auto number = [&](const std::string& name, int& into, bool required) -> status {
    const auto v = env(name);
    if (!v) {
      if (!required) return ok_status();
      return make_error("bad_slurm", "--slurm: " + name + " is not set (start the node with srun inside an allocation)");
    }
    into = whole(*v);
    if (into < 0) return make_error("bad_slurm", "--slurm: " + name + "='" + *v + "' is not a whole number");
    return ok_status();
  };
  for (const auto& [name, into, required] : {std::tuple<std::string, int*, bool>{"SLURM_PROCID", &t.procid, true},
                                             {"SLURM_NTASKS", &t.ntasks, false},
                                             {"SLURM_LOCALID", &t.localid, false}})
    if (auto st = number(name, *into, required); !st) return st.err();
  if (t.ntasks < 1 || t.procid >= t.ntasks)
    return make_error("bad_slurm", "--slurm: SLURM_PROCID " + std::to_string(t.procid) + " is not below SLURM_NTASKS " +
                                       std::to_string(t.ntasks));
  t.job = env("SLURM_JOB_ID").value_or("0");
  t.step = env("SLURM_STEP_ID").value_or("0");
  return t;
}

std::vector<int> task_devices(const slurm_task& t, const slurm_devices& d) {
  std::vector<int> out;
  for (int i = 0; i < d.per_task; ++i) out.push_back(d.base + t.procid * d.per_task + i);
  return out;
}

std::string task_name(const slurm_task& t) { return "slurm-" + t.job + "." + t.step + "-" + std::to_string(t.procid); }

result<std::string> advertised_endpoint(const std::string& endpoint, const std::string& host) {
  const auto colon = endpoint.rfind(':');
  if (endpoint.rfind("tcp://", 0) != 0 || colon == std::string::npos || colon < 6)
    return make_error("bad_endpoint", "'" + endpoint + "' is not tcp://HOST:PORT");
  std::string h = endpoint.substr(6, colon - 6);
  if (h == "0.0.0.0" || h == "*" || h == "[::]" || h == "::") {
    if (host.empty()) return make_error("bad_endpoint", "'" + endpoint + "' listens on every address, and this machine's name is unknown");
    h = host;
  }
  return "tcp://" + h + endpoint.substr(colon);
}

status write_file_atomically(const std::string& path, const std::string& text) {
  const auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return make_error("io", "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return make_error("io", "cannot rename " + tmp + " to " + path + ": " + ec.message());
  return ok_status();
}

}  // namespace dynapar::launch
