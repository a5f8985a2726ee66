// The layers between steps: a plan's moves, a consistent cut (checkpoints, their shards
// written where the layers are), and copies or hashes gathered from their holders (the end).
#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include "actors/driver.hpp"
#include "comm/keys.hpp"
#include "logging/logging.hpp"

namespace dynapar::actors::detail {

// Between steps every replica of a layer is the same (invariant 3), so one copy per layer and
// the controller's state make a consistent cut; the caller writes it out.
status driver::take_checkpoint(std::int64_t steps_done) {
  training::checkpoint c;
  c.step = steps_done;
  fire_armed(sim::fault_moment::checkpoint, steps_done - 1, plan_devices(), 0.002);
  const bool sharded = cb_.on_checkpoint && cb_.shard_dir && !recovery_.shards_unseen;
  const std::string dir = sharded ? cb_.shard_dir(steps_done) : "";
  if (dir.empty() || !save_shards(c.shards, dir, between_steps(), steps_done - 1)) {
    c.shards.clear();
    if (failure_.empty()) request_layers(c.layers, between_steps(), "the checkpoint");
  }
  if (actors_.controller && failure_.empty())
    self_->request(actors_.controller, timeout_, snapshot_atom::value)
        .receive([&](control::controller_snapshot& x) { c.controller = std::move(x); }, [&](caf::error& e) { failure_ = text(e); });
  if (auto st = check("checkpoint after step " + std::to_string(steps_done - 1)); !st) return st;
  if (!cb_.on_checkpoint) {
    recovery_.cut = std::move(c);
    return ok_status();
  }
  // Shards are committed here, and become the cut only then: a checkpoint not written (a
  // full disk) leaves the one before as the cut, whose files stay.
  if (auto st = cb_.on_checkpoint(c); !st) {
    logging::get("train")->warn("step {}: the checkpoint was not written ({}); the run rolls back to step {} if it must", steps_done - 1,
                                st.err().message, recovery_.cut.step);
    return ok_status();
  }
  ++out_.checkpoints;
  recovery_.cut = std::move(c);
  return ok_status();
}

bool driver::save_shards(std::vector<training::shard_file>& out, const std::string& dir, std::chrono::milliseconds wait, std::int64_t t) {
  using handle = decltype(self_->request(device_handle{}, timeout_, save_atom::value, 0, std::string()));
  const auto started = clock::now();
  std::vector<handle> asked;  // all at once: the holders write in parallel
  for (int l = 0; l < L_; ++l) {
    out.push_back({dir + "/layer-" + std::to_string(l) + ".pt", ""});
    asked.push_back(self_->request(actors_.devices.at(holders_.at(l).front()), wait, save_atom::value, l, out.back().path));
  }
  if (faults_.waiting(sim::fault_moment::shard)) fire_armed(sim::fault_moment::shard, t, plan_devices(), 0.002);
  std::string unwritten;
  for (std::size_t l = 0; l < asked.size(); ++l)
    asked[l].receive(
        [&](const wire::ops::shard_saved& x) {
          if (!x.error.empty() && unwritten.empty()) unwritten = x.error;
          out[l].sha256 = x.sha256;
        },
        [&](caf::error& e) { answer_failed(e, started, "the checkpoint"); });
  if (!failure_.empty()) return false;
  // Each shard as this process sees it: a node writing to a disk of its own (no shared
  // filesystem) leaves nothing here to commit.
  for (std::size_t l = 0; l < out.size() && unwritten.empty(); ++l)
    if (auto sha = comm::file_sha256(out[l].path); !sha || *sha != out[l].sha256) {
      unwritten = "layer " + std::to_string(l) + "'s shard is not in '" + dir + "' as its holder wrote it (no filesystem shared with the nodes?)";
      recovery_.shards_unseen = true;
    }
  if (unwritten.empty()) return true;
  logging::get("train")->warn("checkpoint shards: {}; the layers are gathered instead{}", unwritten,
                              recovery_.shards_unseen ? ", for the rest of the run" : "");
  return false;
}

driver::staged_layer driver::stage_layer(int from, int layer, std::int64_t t, double& bytes, std::string& dir) {
  const auto& giver = actors_.devices.at(from);
  if (dir.empty() && cb_.shard_dir) dir = cb_.shard_dir(t);
  if (!dir.empty() && !recovery_.shards_unseen) {
    training::shard_file f{dir + "/staged-layer-" + std::to_string(layer) + ".pt", ""};
    std::string unwritten;
    self_->request(giver, timeout_, save_atom::value, layer, f.path)
        .receive([&](const wire::ops::shard_saved& x) { f.sha256 = x.sha256, unwritten = x.error, bytes = static_cast<double>(x.bytes); },
                 [&](caf::error& e) { failure_ = text(e); });
    if (!failure_.empty()) return model::layer_copy{};
    if (unwritten.empty()) {
      if (auto sha = comm::file_sha256(f.path); sha && *sha == f.sha256) {
        logging::get("train")->info("before step {}: a cycle of moves; layer {} staged in a shard by device {}", t, layer, from);
        return f;
      }
      unwritten = "not in '" + dir + "' as its holder wrote it (no filesystem shared with the nodes?)";
      recovery_.shards_unseen = true;
    }
    logging::get("train")->warn("before step {}: layer {}'s staged shard: {}; it is staged here instead", t, layer, unwritten);
  }
  model::layer_copy c;
  self_->request(giver, timeout_, copy_atom::value, layer)
      .receive([&](model::layer_copy& x) { c = std::move(x); }, [&](caf::error& e) { failure_ = text(e); });
  if (c) bytes = static_cast<double>(model::bytes(c));
  return c;
}

void driver::place_staged(const std::vector<std::pair<planner::layer_move, staged_layer>>& staged) {
  std::set<std::string> dirs;
  for (const auto& [mv, what] : staged) {
    if (!failure_.empty()) break;
    const auto& target = actors_.devices.at(mv.to);
    const auto refused = [&](caf::error& e) { failure_ = text(e); };
    if (const auto* f = std::get_if<training::shard_file>(&what)) {
      dirs.insert(std::filesystem::path(f->path).parent_path().string());
      self_->request(target, timeout_, hold_atom::value, mv.layer, *f).receive([](bool) {}, refused);
    } else {
      self_->request(target, timeout_, hold_atom::value, mv.layer, std::get<model::layer_copy>(what)).receive([](bool) {}, refused);
    }
  }
  std::error_code ec;
  for (const auto& d : dirs) std::filesystem::remove_all(d, ec);  // read by now, or failed: a rollback reads the cut, not these
}

void driver::place_first(const std::vector<planner::layer_move>& moves) {
  using handle = decltype(self_->request(device_handle{}, timeout_, hold_atom::value, 0, model::layer_copy{}));
  const auto& f = recovery_.fresh;
  const auto refused = [&](caf::error& e) { failure_ = text(e); };
  std::vector<handle> asked;
  for (const auto& mv : moves) {
    const auto& target = actors_.devices.at(mv.to);
    if (!f.shards.empty())  // the device reads its shard: nothing of the layer passes through here
      asked.push_back(self_->request(target, timeout_, hold_atom::value, mv.layer, f.shards.at(static_cast<std::size_t>(mv.layer))));
    else if (f.layers.empty() && actors_.remote)
      asked.push_back(self_->request(target, timeout_, hold_atom::value, mv.layer, model::layer_copy{}));
    else
      self_->request(target, timeout_, hold_atom::value, mv.layer, f.layers.empty() ? model::copy_layer(m_, mv.layer) : f.layers.at(mv.layer))
          .receive([](bool) {}, refused);
  }
  for (auto& h : asked) h.receive([](bool) {}, refused);
}

// One replica of every layer (from its first holder) into `out`; failures land in failure_.
void driver::request_layers(std::vector<model::layer_copy>& out, std::chrono::milliseconds wait, const char* what) {
  using handle = decltype(self_->request(device_handle{}, timeout_, copy_atom::value, 0));
  const auto started = clock::now();
  std::vector<handle> asked;  // all at once: a hung holder costs one wait, not one per layer
  for (int l = 0; l < L_; ++l) asked.push_back(self_->request(actors_.devices.at(holders_.at(l).front()), wait, copy_atom::value, l));
  for (auto& h : asked)
    h.receive([&](model::layer_copy& x) { out.push_back(std::move(x)); }, [&](caf::error& e) { answer_failed(e, started, what); });
}

// One replica of every layer, a layer at a time, and each whole state's hash into `hashes`.
// Without `keep_state` a layer comes with its parameters and buffers only: its holder hashes
// the whole state and drops the optimizer's, which never travels. So this process holds the
// model once, never with its optimizer state (evaluation, the end). The first failure (in
// failure_) ends the gathering.
void driver::collect_layers(std::vector<model::layer_copy>& out, std::vector<std::uint64_t>& hashes,
                            training::train_settings::final_form form, std::chrono::milliseconds wait, const char* what) {
  using form_t = training::train_settings::final_form;
  const auto started = clock::now();
  const auto got = [&](model::layer_copy& x) {
    hashes.push_back(model::state_hashes({x}).front());
    out.push_back(std::move(x));
  };
  const auto failed = [&](caf::error& e) { answer_failed(e, started, what); };
  for (int l = 0; l < L_ && failure_.empty(); ++l) {
    const auto& holder = actors_.devices.at(holders_.at(l).front());
    if (form == form_t::whole)
      self_->request(holder, wait, copy_atom::value, l).receive(got, failed);
    else if (form == form_t::lean)  // the holder hashes the whole state and drops the optimizer's: it never travels
      self_->request(holder, wait, copy_lean_atom::value, l).receive(got, failed);
    else  // the holder hashes the whole state where it is
      self_->request(holder, wait, hash_atom::value, l).receive([&](std::uint64_t h) { hashes.push_back(h); }, failed);
  }
}

// Sends `moves` and waits for every arrival; a failure is left in failure_. Returns the bytes
// that arrived.
double driver::move_layers(const std::vector<planner::layer_move>& moves, std::int64_t t) {
  const auto me = caf::actor_cast<migration_sink>(self_);  // the driver receives moved_atom
  int pending = 0;
  // The arrivals this diff waits for. An arrival of an earlier, failed migration can still be
  // on its way (its target survived): it must not count for this one, whose layer may not
  // have arrived yet (chaos seed 2036: a stage then ran without its layer).
  std::multiset<std::tuple<int, int, int>> expected;
  std::vector<planner::layer_move> firsts;
  for (const auto& mv : moves)
    if (mv.from >= 0 ? !actors_.devices.count(mv.from) : current_.has_value()) {  // recover() rolls back first
      failure_ = "layer " + std::to_string(mv.layer) + " has no surviving holder to come from (before step " + std::to_string(t) + ")";
      return 0;
    }
  // Each target is told first what it will take and from whom (a device refuses a layer no
  // migration names, docs/SECURITY.md); all asked at once, then every answer awaited.
  const auto announce = [&](const planner::layer_move& mv) {
    return self_->request(actors_.devices.at(mv.to), timeout_, expect_atom::value, mv.layer, mv.from);
  };
  std::vector<decltype(announce(moves.front()))> announced;
  for (const auto& mv : moves)
    if (mv.from >= 0) announced.push_back(announce(mv));
  for (auto& a : announced) a.receive([](bool) {}, [&](caf::error& e) { failure_ = text(e); });
  if (!failure_.empty()) return 0;
  for (const auto& mv : moves) {
    const auto& target = actors_.devices.at(mv.to);
    if (mv.from < 0) {  // the first plan: fresh layers, or a resumed run's saved ones
      firsts.push_back(mv);
      continue;
    }
    self_->request(actors_.devices.at(mv.from), timeout_, migrate_atom::value, mv.layer, mv.to, device_peer{target}, link(mv.from, mv.to), me)
        .receive(
            [&](bool) {
              ++pending;
              expected.emplace(mv.layer, mv.from, mv.to);
            },
            [&](caf::error& e) { failure_ = text(e); });
  }
  if (!firsts.empty() && faults_.waiting(sim::fault_moment::placement)) {
    std::vector<int> to;
    for (const auto& mv : firsts) to.push_back(mv.to);
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
    fire_armed(sim::fault_moment::placement, t, to, 0.005);
  }
  place_first(firsts);
  double bytes = 0;
  // A lost node sends no down message: its devices are looked at every 100 ms, as in a step.
  const auto give_up_at = clock::now() + timeout_;
  const auto moving_lost = [&] {
    for (const auto& mv : moves)
      for (int id : {mv.from, mv.to})
        if (id >= 0 && actors_.remote && actors_.remote->lost(id)) return id;
    return -1;
  };
  for (int k = 0; k < pending && failure_.empty();)
    self_->receive(
        [&](moved_atom, int layer, int from, int to, std::size_t b) {
          const auto it = expected.find({layer, from, to});
          if (it == expected.end()) return;  // an earlier migration's
          expected.erase(it);
          bytes += static_cast<double>(b);
          ++k;
        },
        [&](moved_atom, int layer, int from, int to, const std::string& refused) {  // out of memory
          if (expected.count({layer, from, to})) failure_ = refused;
        },
        [&](caf::down_msg& d) {  // a source or target of this diff stopped
          note_down(d, false);
          for (const auto& mv : moves)
            if (members_.dead(mv.to) || members_.dead(mv.from)) failure_ = "a device stopped while layers moved";
        },
        caf::after(std::chrono::milliseconds(100)) >> [&] {
          if (const int id = moving_lost(); id >= 0) failure_ = "device " + std::to_string(id) + "'s node was lost while layers moved";
          else if (clock::now() >= give_up_at) failure_ = "a layer did not arrive";
        });
  return bytes;
}

}  // namespace dynapar::actors::detail
