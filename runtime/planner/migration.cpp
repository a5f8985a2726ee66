#include "planner/migration.hpp"

#include <algorithm>

namespace dynapar::planner {

migration_order::migration_order(const plan_diff& d) : waiting_(d.moves) {
  // Layers that no move reads go first, and are answered, so that the memory they free is
  // there for the layers moving in (CI: resnet18's layer 8 reached device 1 before the layers
  // it was giving up went, and did not fit).
  for (const auto& drop : d.drops) (reads(waiting_, drop) ? late_ : early_).push_back(drop);
}

bool migration_order::reads(const std::vector<layer_move>& moves, const std::pair<int, int>& d) const {
  return std::any_of(moves.begin(), moves.end(), [&](const layer_move& mv) { return mv.from == d.first && mv.layer == d.second; });
}

migration_step migration_order::drop(std::vector<std::pair<int, int>> d) {
  migration_step s;
  s.what = migration_step::kind::drop;
  s.drops = std::move(d);
  return s;
}

bool migration_order::next(migration_step& out) {
  const auto hand_out = [&](migration_step s) {
    if (s.what == migration_step::kind::drop) dropped_.insert(dropped_.end(), s.drops.begin(), s.drops.end());
    out = std::move(s);
    return true;
  };
  if (!queued_.empty()) {
    auto s = std::move(queued_.front());
    queued_.erase(queued_.begin());
    return hand_out(std::move(s));
  }
  if (done_) return false;
  if (!started_) {
    started_ = true;
    if (!early_.empty()) return hand_out(drop(early_));
  }
  if (!waiting_.empty()) {
    // A move is ready when its target gives nothing a waiting move still reads (own_data test:
    // device 5 held a layer on its way to device 4 when layer 1 arrived, and the two did not
    // fit its memory at once).
    std::vector<layer_move> wave, later;
    for (const auto& mv : waiting_) {
      const bool gives = std::any_of(late_.begin(), late_.end(), [&](const auto& d) { return d.first == mv.to; });
      (gives ? later : wave).push_back(mv);
    }
    if (wave.empty()) {
      // A cycle: staged at a giver (a device keeping the layer keeps it: own_data test, device
      // 0 lost layer 0 here); the moves reading that layer there first, then the rest.
      const auto giver = std::find_if(later.begin(), later.end(), [&](const auto& mv) {
        return std::count(late_.begin(), late_.end(), std::pair{mv.from, mv.layer}) > 0;
      });
      if (giver == later.end()) {
        error_ = "a cycle of moves without a giver";
        done_ = true;
        return false;
      }
      migration_step s;
      s.what = migration_step::kind::stage;
      s.from = giver->from;
      s.layer = giver->layer;
      const auto rest = std::stable_partition(later.begin(), later.end(), [&](const auto& mv) { return mv.from == s.from && mv.layer == s.layer; });
      s.moves.assign(later.begin(), rest);
      late_.erase(std::remove(late_.begin(), late_.end(), std::pair{s.from, s.layer}), late_.end());
      waiting_.assign(rest, later.end());
      staged_ = true;
      queued_.push_back(drop({{s.from, s.layer}}));  // the giver has room for what it takes
      return hand_out(std::move(s));
    }
    migration_step s;
    s.what = migration_step::kind::move;
    s.moves = std::move(wave);
    waiting_ = std::move(later);
    // Dropped between waves: what no waiting move still reads.
    std::vector<std::pair<int, int>> sent, kept;
    for (const auto& d : late_) (reads(waiting_, d) ? kept : sent).push_back(d);
    if (!waiting_.empty() && !sent.empty()) {
      queued_.push_back(drop(std::move(sent)));
      late_ = std::move(kept);
    }
    return hand_out(std::move(s));
  }
  done_ = true;
  if (staged_) {  // room first, then the staged copies (examples/jobs/own_next_token.yaml: two
                  // edge devices swapping blocks, each with room for one, ran out of memory
                  // when the cycle went at once)
    if (!late_.empty()) queued_.push_back(drop(std::move(late_)));
    late_.clear();
    migration_step place;
    place.what = migration_step::kind::place_staged;
    queued_.push_back(std::move(place));
  } else if (!late_.empty()) {
    migration_step last;
    last.what = migration_step::kind::drop_last;
    last.drops = std::move(late_);
    late_.clear();
    queued_.push_back(std::move(last));
  }
  return next(out);
}

}  // namespace dynapar::planner
