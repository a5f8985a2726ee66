#include "training/checkpoint_files.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/keys.hpp"
#include "common/durable_file.hpp"
#include "logging/logging.hpp"

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

// The checkpoints in `dir` by step, newest first.
std::vector<std::pair<std::int64_t, fs::path>> checkpoints_in(const fs::path& dir) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 23 || !e.is_directory(ec)) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    found.emplace_back(std::stoll(name.substr(5)), e.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

status write_now(const checkpoint_options& o, const checkpoint& c) {
  std::error_code ec;
  const std::string name = "step-" + std::to_string(c.step);
  const fs::path dir(o.dir), tmp = dir / ("." + name + ".tmp"), final_dir = dir / name;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return make_error("io", "cannot create '" + tmp.string() + "': " + ec.message());
  const fs::path layers = tmp / "layers.pt";
  if (auto st = model::save_layers(layers.string(), c.layers); !st) return st;  // written durably
  auto hash = comm::file_sha256(layers.string());
  if (!hash) return hash.err();
  json state = {{"job", o.job}, {"step", c.step}, {"format", 2}, {"layers_sha256", *hash}};
  if (!o.fingerprint.is_null()) state["fingerprint"] = o.fingerprint;
  if (c.controller) state["controller"] = controller_json(*c.controller);
  if (auto st = write_durably((tmp / "state.json").string(), state.dump(2) + "\n"); !st) return st;
  if (auto st = sync_path(tmp.string(), true); !st) return st;
  fs::remove_all(final_dir, ec);  // the same step again, after a rollback
  fs::rename(tmp, final_dir, ec);
  if (ec) return make_error("io", "cannot rename '" + tmp.string() + "': " + ec.message());
  if (auto st = sync_path(dir.string(), true); !st) return st;
  const fs::path latest_tmp = dir / ".latest.tmp";
  if (auto st = write_durably(latest_tmp.string(), name + "\n"); !st) return st;
  fs::rename(latest_tmp, dir / "latest", ec);
  if (ec) return make_error("io", "cannot rename '" + latest_tmp.string() + "': " + ec.message());
  if (auto st = sync_path(dir.string(), true); !st) return st;
  if (o.keep > 0) {
    const auto all = checkpoints_in(dir);
    for (std::size_t i = static_cast<std::size_t>(o.keep); i < all.size(); ++i)
      if (all[i].first != c.step) fs::remove_all(all[i].second, ec);
  }
  return ok_status();
}

// One checkpoint directory. Damage is "bad_checkpoint" (the caller may fall back to an older
// one); a checkpoint of another job or fingerprint is "bad_resume" (refused).
result<checkpoint> read_one(const fs::path& at, const std::string& job, const json& fingerprint, const model::model_chain& m) {
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
      return make_error("bad_resume", "the checkpoint in '" + at.parent_path().string() + "' is of job '" +
                                          state.at("job").get<std::string>() + "', not '" + job + "'");
    if (state.contains("fingerprint") && !fingerprint.is_null())
      for (const auto& [field, was] : state.at("fingerprint").items()) {
        const json now = fingerprint.contains(field) ? fingerprint.at(field) : json();
        if (now != was)
          return make_error("bad_resume", "the checkpoint in '" + at.parent_path().string() + "' was written by a job with " + field +
                                              ": " + was.dump() + "; this job has " + (now.is_null() ? "none" : now.dump()) +
                                              " (resume with the job that wrote it, or start afresh)");
      }
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
    if (state.contains("layers_sha256")) {  // absent before format 2
      auto hash = comm::file_sha256((at / "layers.pt").string());
      if (!hash) return make_error("bad_checkpoint", "'" + (at / "layers.pt").string() + "' is missing");
      if (*hash != state.at("layers_sha256").get<std::string>())
        return make_error("bad_checkpoint", "'" + (at / "layers.pt").string() + "' does not match the SHA-256 in state.json (torn or changed)");
    }
  } catch (const std::exception& e) {
    return make_error("bad_checkpoint", "'" + (at / "state.json").string() + "': " + e.what());
  }
  auto layers = model::load_layers((at / "layers.pt").string(), m);
  if (!layers) return make_error("bad_checkpoint", layers.err().message);
  c.layers = std::move(*layers);
  return c;
}

}  // namespace

json job_fingerprint(const prepared_job& p) {
  const auto& j = p.job;
  const auto& o = p.settings.optimizer;
  std::ostringstream data;
  data << std::hex << data::fingerprint(p.train_set);
  json f = {{"model", j.model},
            {"data", data.str()},
            {"batch", p.settings.batch},
            {"micro_batch", j.cluster.planner.micro_batch},
            {"seed", j.seed},
            {"exact", j.exact},
            {"optimizer.kind", o.kind},
            {"optimizer.lr", o.lr},
            {"optimizer.momentum", o.momentum},
            {"optimizer.weight_decay", o.weight_decay},
            {"optimizer.nesterov", o.nesterov},
            {"optimizer.schedule", {{"kind", o.schedule.kind}, {"warmup_steps", o.schedule.warmup_steps}, {"steps", o.schedule.steps},
                                    {"step_size", o.schedule.step_size}, {"gamma", o.schedule.gamma}, {"min_lr", o.schedule.min_lr}}},
            {"optimizer.clip_grad_norm", o.clip_grad_norm},
            {"loss.label_smoothing", o.label_smoothing},
            {"loss.kind", j.data.regression ? "mse" : j.data.next_token ? "next_token" : "cross_entropy"}};
  if (o.bf16) f["precision"] = "bf16";  // absent for fp32, as before the field existed
  if (model::is_torchscript(j.model))  // the file's bytes, not only its name
    if (auto h = comm::file_sha256(j.model)) f["model_sha256"] = *h;
  return f;
}

void checkpoint_writer::write(checkpoint c) {
  if (writer_.joinable()) writer_.join();
  writer_ = std::thread([o = o_, c = std::move(c), failed = failed_] {
    auto st = write_now(o, c);
    if (st) return;
    std::error_code ec;
    fs::remove_all(fs::path(o.dir) / (".step-" + std::to_string(c.step) + ".tmp"), ec);  // give the space back
    const auto kept = checkpoints_in(o.dir);
    const std::string newest = kept.empty() ? "none" : kept.front().second.filename().string();
    logging::get("checkpoint")->warn("the checkpoint of step {} was not written ({}); the newest complete one stays {}", c.step,
                                     st.err().message, newest);
    failed->push_back("step-" + std::to_string(c.step) + ": " + st.err().message);
  });
}

std::vector<std::string> checkpoint_writer::finish() {
  if (writer_.joinable()) writer_.join();
  return *failed_;
}

result<found_checkpoint> load_checkpoint(const std::string& dir, const std::string& job, const json& fingerprint,
                                         const model::model_chain& m) {
  const auto all = checkpoints_in(dir);
  if (all.empty()) return make_error("bad_checkpoint", "no checkpoint in '" + dir + "' (no step-N directory)");
  found_checkpoint found;
  for (const auto& [step, at] : all) {
    auto c = read_one(at, job, fingerprint, m);
    if (c) {
      found.at = std::move(*c);
      return found;
    }
    if (c.err().code != "bad_checkpoint") return c.err();
    found.passed_over.push_back(at.filename().string() + ": " + c.err().message);
  }
  std::string why;
  for (const auto& p : found.passed_over) why += (why.empty() ? "" : "; ") + p;
  return make_error("bad_checkpoint", "no complete checkpoint in '" + dir + "': " + why);
}

}  // namespace dynapar::training
