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

std::string step_name(std::int64_t step) { return "step-" + std::to_string(step); }
fs::path tmp_dir(const checkpoint_options& o, std::int64_t step) { return fs::absolute(fs::path(o.dir) / ("." + step_name(step) + ".tmp")); }

// The checkpoint's files into its temporary directory, and what the manifest says of them:
// gathered layers written here; shards already there, written by their holders.
result<json> write_files(const checkpoint_options& o, const checkpoint& c) {
  std::error_code ec;
  const fs::path tmp = tmp_dir(o, c.step);
  if (!c.shards.empty()) {
    json shards = json::array();
    for (std::size_t l = 0; l < c.shards.size(); ++l) {
      const fs::path at(c.shards[l].path);
      if (at.parent_path() != tmp) return make_error("io", "layer " + std::to_string(l) + "'s shard '" + at.string() + "' is not in '" + tmp.string() + "'");
      shards.push_back({{"file", at.filename().string()}, {"sha256", c.shards[l].sha256}});
    }
    return json{{"format", 3}, {"shards", shards}};
  }
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return make_error("io", "cannot create '" + tmp.string() + "': " + ec.message());
  const fs::path layers = tmp / "layers.pt";
  if (auto st = model::save_layers(layers.string(), c.layers); !st) return st.err();  // written durably
  auto hash = comm::file_sha256(layers.string());
  if (!hash) return hash.err();
  return json{{"format", 2}, {"layers_sha256", *hash}};
}

status write_now(const checkpoint_options& o, const checkpoint& c) {
  std::error_code ec;
  const std::string name = step_name(c.step);
  const fs::path dir(o.dir), tmp = tmp_dir(o, c.step), final_dir = dir / name;
  auto files = write_files(o, c);
  if (!files) return files.err();
  json state = {{"job", o.job}, {"step", c.step}};
  state.update(*files);
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
    const auto check_file = [&](const std::string& file, const std::string& sha) -> status {
      auto hash = comm::file_sha256((at / file).string());
      if (!hash) return make_error("bad_checkpoint", "'" + (at / file).string() + "' is missing");
      if (*hash != sha) return make_error("bad_checkpoint", "'" + (at / file).string() + "' does not match the SHA-256 in state.json (torn or changed)");
      return ok_status();
    };
    if (state.contains("shards")) {  // format 3: read where each layer is placed
      for (const auto& s : state.at("shards")) {
        const auto file = s.at("file").get<std::string>();
        if (file.empty() || file.find('/') != std::string::npos || file[0] == '.')
          return make_error("bad_checkpoint", "'" + (at / "state.json").string() + "' names the shard '" + file + "' outside its directory");
        if (auto st = check_file(file, s.at("sha256").get<std::string>()); !st) return st.err();
        c.shards.push_back({fs::absolute(at / file).string(), s.at("sha256").get<std::string>()});
      }
      if (c.shards.empty()) return make_error("bad_checkpoint", "'" + (at / "state.json").string() + "' lists no shard");
      return c;
    }
    if (state.contains("layers_sha256"))  // absent before format 2
      if (auto st = check_file("layers.pt", state.at("layers_sha256").get<std::string>()); !st) return st.err();
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

namespace {

// A write that failed: its space given back, logged and kept for finish().
void write_failed(const checkpoint_options& o, std::int64_t step, const error& why, std::vector<std::string>& failed) {
  std::error_code ec;
  fs::remove_all(tmp_dir(o, step), ec);
  const auto kept = checkpoints_in(o.dir);
  const std::string newest = kept.empty() ? "none" : kept.front().second.filename().string();
  logging::get("checkpoint")->warn("the checkpoint of step {} was not written ({}); the newest complete one stays {}", step,
                                   why.message, newest);
  failed.push_back(step_name(step) + ": " + why.message);
}

}  // namespace

std::string checkpoint_writer::shard_dir(std::int64_t step) const {
  std::error_code ec;
  const fs::path tmp = tmp_dir(o_, step);
  fs::remove_all(tmp, ec);  // an attempt at this step that a lost device broke off
  fs::create_directories(tmp, ec);
  return ec ? std::string() : tmp.string();
}

status checkpoint_writer::write(checkpoint& c) {
  if (writer_.joinable()) writer_.join();
  if (!c.shards.empty()) {
    if (auto st = write_now(o_, c); !st) {
      write_failed(o_, c.step, st.err(), *failed_);
      return st;
    }
    for (auto& s : c.shards) s.path = fs::absolute(fs::path(o_.dir) / step_name(c.step) / fs::path(s.path).filename()).string();
    return ok_status();
  }
  writer_ = std::thread([o = o_, c, failed = failed_] {
    if (auto st = write_now(o, c); !st) write_failed(o, c.step, st.err(), *failed);
  });
  return ok_status();
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
