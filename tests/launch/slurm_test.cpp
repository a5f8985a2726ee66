// A node under srun: its devices, name and errors from the SLURM_* variables (a fake
// environment), and the address a controller publishes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "launch/slurm.hpp"

using namespace dynapar::launch;

namespace {
env_lookup fake(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
}  // namespace

TEST_CASE("an srun task hosts its own range of the job's devices", "[unit][slurm]") {
  auto t = read_slurm_task(fake({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "41"}, {"SLURM_STEP_ID", "0"}}));
  REQUIRE(t);
  CHECK(t->procid == 2);
  CHECK(t->ntasks == 3);
  CHECK(task_name(*t) == "slurm-41.0-2");
  CHECK(task_devices(*t, {0, 1}) == std::vector<int>{2});
  CHECK(task_devices(*t, {4, 2}) == std::vector<int>{8, 9});  // a second allocation from device 4, two a task
  // Every task of an allocation hosts different devices, and together they cover the range.
  std::vector<int> all;
  for (int p = 0; p < 3; ++p) {
    slurm_task q = *t;
    q.procid = p;
    for (int d : task_devices(q, {4, 2})) all.push_back(d);
  }
  CHECK(all == std::vector<int>{4, 5, 6, 7, 8, 9});
}

TEST_CASE("outside srun or with malformed variables, --slurm is an error naming the variable", "[unit][slurm]") {
  auto none = read_slurm_task(fake({}));
  REQUIRE_FALSE(none);
  CHECK(none.err().message.find("SLURM_PROCID is not set") != std::string::npos);
  auto bad = read_slurm_task(fake({{"SLURM_PROCID", "x1"}}));
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("SLURM_PROCID='x1'") != std::string::npos);
  auto past = read_slurm_task(fake({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "3"}}));
  REQUIRE_FALSE(past);
  CHECK(past.err().message.find("not below SLURM_NTASKS 3") != std::string::npos);
  auto negative = read_slurm_task(fake({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "-1"}}));
  CHECK_FALSE(negative);
  // Only SLURM_PROCID is required: a single task without the others is task 0 of 1.
  auto lone = read_slurm_task(fake({{"SLURM_PROCID", "0"}}));
  REQUIRE(lone);
  CHECK(task_name(*lone) == "slurm-0.0-0");
}

TEST_CASE("a controller listening on every address publishes this machine's name", "[unit][slurm]") {
  CHECK(*advertised_endpoint("tcp://0.0.0.0:5555", "gpu-box-3") == "tcp://gpu-box-3:5555");
  CHECK(*advertised_endpoint("tcp://10.1.2.3:41000", "gpu-box-3") == "tcp://10.1.2.3:41000");
  CHECK(*advertised_endpoint("tcp://[::]:7", "h") == "tcp://h:7");
  CHECK_FALSE(advertised_endpoint("tcp://0.0.0.0:5555", ""));
  CHECK_FALSE(advertised_endpoint("ipc:///tmp/x", "h"));
  const auto dir = std::filesystem::temp_directory_path() / "dynapar_slurm_test";
  std::filesystem::create_directories(dir);
  const auto file = (dir / "controller.addr").string();
  REQUIRE(write_file_atomically(file, "tcp://h:7\n"));
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  CHECK(line == "tcp://h:7");
  CHECK_FALSE(std::filesystem::exists(file + ".tmp"));
  CHECK_FALSE(write_file_atomically((dir / "no" / "such" / "dir").string(), "x"));
  std::filesystem::remove_all(dir);
}
