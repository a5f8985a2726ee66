#include "training/checkpoint_files.hpp"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace dynapar::training {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json controller_json(const control::controller_snapshot& c) {
  json energy = json::array();
  for (const auto& [id, z] : c.queues.energy) energy.push_back({id, z});
  json energy_spent = json::array();
  for (const auto& [id, j] : c.queues.energy_spent) energy_spent.push_back({id, j});
  return {{"cost_queue", c.queues.cost},
          {"cost_spent", c.queues.spent},
          {"cost_slots", c.queues.slots},
          {"energy_queues", energy},
          {"energy_spent", energy_spent},
          {"speeds", c.estimates.speeds},
          {"link_tiers", {c.estimates.tiers[0], c.estimates.tiers[1], c.estimates.tiers[2]}}};
}

status write_now(const std::string& dir, const std::string& job, const checkpoint& c) {
  std::error_code ec;
  const std::string name = "step-" + std::to_string(c.step);
  const fs::path tmp = fs::path(dir) / ("." + name + ".tmp"), final_dir = fs::path(dir) / name;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return make_error("io", "cannot create '" + tmp.string() + "': " + ec.message());
  if (auto st = model::save_layers((tmp / "layers.pt").string(), c.layers); !st) return st;
  json state = {{"job", job}, {"step", c.step}, {"format", 1}};
  if (c.controller) state["controller"] = controller_json(*c.controller);
  {
    std::ofstream f(tmp / "state.json");
    if (!(f << state.dump(2) << "\n")) return make_error("io", "cannot write '" + (tmp / "state.json").string() + "'");
  }
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) return make_error("io", "cannot rename '" + tmp.string() + "': " + ec.message());
  const fs::path latest_tmp = fs::path(dir) / ".latest.tmp";
  {
    std::ofstream f(latest_tmp);
    if (!(f << name << "\n")) return make_error("io", "cannot write '" + latest_tmp.string() + "'");
  }
  fs::rename(latest_tmp, fs::path(dir) / "latest", ec);
  if (ec) return make_error("io", "cannot rename '" + latest_tmp.string() + "': " + ec.message());
  return ok_status();
}

}  // namespace

void checkpoint_writer::write(checkpoint c) {
  if (writer_.joinable()) writer_.join();
  writer_ = std::thread([dir = dir_, job = job_, c = std::move(c), last = last_] {
    auto st = write_now(dir, job, c);
    if (!st) *last = st;
  });
}

status checkpoint_writer::finish() {
  if (writer_.joinable()) writer_.join();
  return *last_;
}

result<checkpoint> load_checkpoint(const std::string& dir, const std::string& job, const model::model_chain& m) {
  std::ifstream latest(fs::path(dir) / "latest");
  std::string name;
  if (!(latest >> name)) return make_error("bad_checkpoint", "no checkpoint in '" + dir + "' (no 'latest' file)");
  const fs::path at = fs::path(dir) / name;
  std::ifstream f(at / "state.json");
  if (!f) return make_error("bad_checkpoint", "'" + (at / "state.json").string() + "' is missing");
  json state;
  try {
    state = json::parse(f);
  } catch (const std::exception& e) {
    return make_error("bad_checkpoint", "'" + (at / "state.json").string() + "' is not JSON: " + e.what());
  }
  checkpoint c;
  try {
    if (state.at("job").get<std::string>() != job)
      return make_error("bad_checkpoint", "the checkpoint in '" + dir + "' is of job '" + state.at("job").get<std::string>() +
                                              "', not '" + job + "'");
    c.step = state.at("step").get<std::int64_t>();
    if (state.contains("controller")) {
      const auto& j = state.at("controller");
      control::controller_snapshot s;
      s.queues.cost = j.at("cost_queue").get<double>();
      s.queues.spent = j.value("cost_spent", 0.0);  // absent in checkpoints before budget pacing
      s.queues.slots = j.value("cost_slots", 0);
      for (const auto& e : j.at("energy_queues")) s.queues.energy.emplace_back(e.at(0).get<int>(), e.at(1).get<double>());
      if (j.contains("energy_spent"))  // absent before energy pacing
        for (const auto& e : j.at("energy_spent")) s.queues.energy_spent.emplace_back(e.at(0).get<int>(), e.at(1).get<double>());
      s.estimates.speeds = j.at("speeds").get<std::vector<double>>();
      const auto tiers = j.at("link_tiers").get<std::vector<double>>();
      for (std::size_t i = 0; i < 3 && i < tiers.size(); ++i) s.estimates.tiers[i] = tiers[i];
      c.controller = s;
    }
  } catch (const std::exception& e) {
    return make_error("bad_checkpoint", "'" + (at / "state.json").string() + "': " + e.what());
  }
  auto layers = model::load_layers((at / "layers.pt").string(), m);
  if (!layers) return layers.err();
  c.layers = std::move(*layers);
  return c;
}

}  // namespace dynapar::training
