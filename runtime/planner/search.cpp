#include "planner/search.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>

#include "common/rng.hpp"
#include "planner/hysteresis.hpp"
#include "planner/partition.hpp"
#include "planner/water_fill.hpp"

namespace dynapar::planner {

std::size_t structure_evaluator::vec_hash::operator()(const std::vector<int>& v) const {
  std::size_t h = 1469598103934665603ULL;
  for (int x : v) h = (h ^ static_cast<std::size_t>(x + 1)) * 1099511628211ULL;
  return h;
}

structure_evaluator::structure_evaluator(const problem& p, const plan* previous, queue_state queues)
    : p_(p), previous_(previous), held_(p, previous), queues_(std::move(queues)), w_(weights(p, queues_)) {
  for (int d : p.available) total_speed_ += p.speed(d);
}

const structure_evaluator::entry& structure_evaluator::lookup(const std::vector<int>& devs) {
  auto it = cache_.find(devs);
  if (it != cache_.end()) return it->second;
  entry e;
  double speed = 0, price = 0;
  for (int d : devs) {
    speed += p_.speed(d);
    price += p_.cluster.devices[d].price_per_s;
  }
  // One shape per micro-batch candidate tried, each with its own best split.
  if (p_.cfg.micro_batch > 0 || devs.size() == 1) {
    if (auto s = best_shape(p_, devs, p_.cfg.batch)) e.shapes.push_back(std::move(*s));
  } else {
    // Per-micro-batch overhead o against the bubble: with n stages, per-sample bottleneck r and
    // share b, (b/u) o + (n - 1) u r is least at u* = sqrt(b o / ((n - 1) r)); the candidates
    // within a factor 2.5 of u* are tried.
    const double n = static_cast<double>(devs.size());
    const double r = p_.sums.total_work() / speed, o = p_.sums.fixed(0, p_.num_layers()) / speed * n;
    const double b = p_.cfg.batch * speed / std::max(speed, total_speed_);
    const double u_star = std::sqrt(std::max(1.0, b) * o / std::max(1e-300, (n - 1) * r));
    auto try_u = [&](int u) {
      auto splits = partition_layers(p_, devs, u, false);
      if (!splits) return;
      auto g = make_shape(p_, devs, std::move(*splits), u);
      if (g.feasible) e.shapes.push_back(std::move(g));
    };
    const auto& cand = p_.cfg.micro_batch_candidates;
    auto near = [&](int u) { return u <= 2.5 * u_star && u >= u_star / 2.5; };
    for (int u : cand)
      if (u <= p_.cfg.batch && near(u)) try_u(u);
    // Nothing near u* fits (memory caps 1F1B's micro-batch) or lies in range: the others,
    // largest first, until one fits.
    for (auto c = cand.rbegin(); e.shapes.empty() && c != cand.rend(); ++c)
      if (*c <= p_.cfg.batch && !near(*c)) try_u(*c);
  }
  for (const auto& s : e.shapes) {
    double sec = 0;
    for (int j = 0; j < s.stages(); ++j) sec = std::max(sec, held_.bring(p_, s.devices[j], s.splits[j], s.splits[j + 1]).first);
    e.mig_s.push_back(sec);
  }
  e.price = price;
  e.speed_sum = speed;
  return cache_.emplace(devs, std::move(e)).first->second;
}

bool structure_evaluator::solve(const structure& s, std::vector<choice>& out, double& finish) {
  const std::size_t n = s.size();
  std::vector<const entry*> es(n);
  double speed_total = 0;
  for (std::size_t g = 0; g < n; ++g) {
    es[g] = &lookup(s[g]);
    if (es[g]->shapes.empty()) return false;
    speed_total += es[g]->speed_sum;
  }
  out.assign(n, {nullptr, 0, 0});
  std::vector<affine_group> aff(n);
  auto pick = [&](std::size_t g, double share) {
    const entry& e = *es[g];
    double best = unlimited;
    for (std::size_t k = 0; k < e.shapes.size(); ++k) {
      const double b = std::max(1.0, std::min(share, e.shapes[k].cap));
      const double per = (e.shapes[k].alpha() * b + e.shapes[k].beta()) / b + e.mig_s[k] * 1e-9;  // the affine model water-filling uses
      if (per < best) { best = per; out[g] = {&e.shapes[k], e.mig_s[k], 0}; }
    }
    if (!out[g].shape) return false;  // no shape with a finite time: the grouping is infeasible
    aff[g] = {out[g].shape->alpha(), out[g].shape->beta(), out[g].shape->cap};
    return true;
  };
  for (std::size_t g = 0; g < n; ++g)
    if (!pick(g, p_.cfg.batch * es[g]->speed_sum / speed_total)) return false;
  for (int pass = 0; pass < 2; ++pass) {
    auto fill = water_fill(aff, p_.cfg.batch);
    if (!fill) return false;
    finish = fill->finish;
    for (std::size_t g = 0; g < n; ++g) out[g].share = fill->shares[g];
    if (pass == 0)
      for (std::size_t g = 0; g < n; ++g)
        if (out[g].share > 0 && !pick(g, out[g].share)) return false;
  }
  return true;
}

structure_score structure_evaluator::score(const structure& s) {
  ++evaluations_;
  structure_score r;
  std::vector<choice> ch;
  double finish = 0;
  if (s.empty() || !solve(s, ch, finish)) return r;
  std::vector<const group_shape*> active;
  std::vector<double> shares, times;
  double mig = 0, price = 0, energy_term = 0, compute = 0;
  const bool guarded = w_.guard > 0, guard_energy = guarded && !w_.energy_allowance.empty();
  if (guard_energy) energy_j_.assign(p_.cluster.devices.size(), 0.0);
  for (std::size_t g = 0; g < s.size(); ++g) {
    if (ch[g].share < 0.5) continue;  // rounds to nothing: the group is dropped
    const auto* sh = ch[g].shape;
    active.push_back(sh);
    shares.push_back(ch[g].share);
    times.push_back(sh->alpha() * ch[g].share + sh->beta());
    mig = std::max(mig, ch[g].mig_s);
    compute = std::max(compute, times.back());
    price += lookup(s[g]).price;
    if (!queues_.energy.empty())
      for (int j = 0; j < sh->stages(); ++j) {
        const int d = sh->devices[j];
        const double e = p_.cluster.devices[d].power_w * stage_busy(p_, *sh, j, ch[g].share);
        energy_term += w_.energy[d] * e;
        if (guard_energy) energy_j_[d] += e;
      }
  }
  // The slot's mean step, as evaluate scores it: the migration once over the slot's steps.
  r.batch_time_s = compute + exposed_sync(p_, active, shares, times) + update_time(p_, active) + p_.cfg.per_step(mig);
  r.cost = price * r.batch_time_s;
  r.score = w_.time * r.batch_time_s + w_.cost * r.cost + energy_term;
  if (guarded) r.score += w_.over_allowance(r.cost, energy_j_);
  return r;
}

double structure_evaluator::score_exact(const plan& pl) const {
  auto r = evaluate(p_, pl, previous_, queues_);
  return r ? r->score : unlimited;
}

result<plan> structure_evaluator::materialize(const structure& s, std::int64_t slot) {
  std::vector<choice> ch;
  double finish = 0;
  if (s.empty() || !solve(s, ch, finish)) return make_error("infeasible", "no feasible shares for this grouping");
  std::vector<std::function<double(int)>> time;
  std::vector<int> caps;
  for (const auto& c : ch) {
    const group_shape* sh = c.shape;
    time.push_back([this, sh](int b) { return group_time(p_, *sh, b); });
    // A group score() dropped (its share rounds to nothing) stays out: integer shares weigh
    // the makespan alone, and would give it a sample or two that cost a whole sum.
    caps.push_back(c.share < 0.5 ? 0 : static_cast<int>(std::min<double>(sh->cap, p_.cfg.batch)));
  }
  auto shares = integer_shares(time, caps, p_.cfg.batch, p_.cfg.share_quantum);
  if (!shares) return shares.err();
  plan out;
  out.slot = slot;
  out.schedule = p_.cfg.schedule;
  for (std::size_t g = 0; g < s.size(); ++g) {
    if ((*shares)[g] == 0) continue;
    group_plan gp;
    for (int d : ch[g].shape->devices) gp.devices.push_back(p_.cluster.devices[d].id);
    // Scoring used any split reaching the least bottleneck; the plan gets the least fill too.
    auto refined = partition_layers(p_, ch[g].shape->devices, ch[g].shape->micro_batch, true);
    gp.splits = refined ? *refined : ch[g].shape->splits;
    gp.share = (*shares)[g];
    gp.micro_batch = std::min(ch[g].shape->micro_batch, gp.share);
    out.groups.push_back(std::move(gp));
  }
  return out;
}

structure warm_start(const problem& p, const plan& previous) {
  structure s;
  for (const auto& g : previous.groups) {
    std::vector<int> devs;
    for (int id : g.devices) {
      const int i = p.links.index_of(id);
      if (i >= 0 && p.cluster.devices[i].available) devs.push_back(i);
    }
    if (static_cast<int>(devs.size()) > p.num_layers()) devs.resize(p.num_layers());
    if (!devs.empty()) s.push_back(std::move(devs));
  }
  return s;
}

std::vector<structure> cold_starts(structure_evaluator& ev, std::size_t keep) {
  const problem& p = ev.prob();
  std::vector<int> order = p.available;
  const auto& d = p.cluster.devices;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (d[a].rack != d[b].rack) return d[a].rack < d[b].rack;
    if (d[a].node != d[b].node) return d[a].node < d[b].node;
    return d[a].speed > d[b].speed;
  });
  const int n_max = std::min({p.num_layers(), p.cfg.max_stages, static_cast<int>(order.size())});
  std::vector<std::pair<double, structure>> ranked;
  for (int n = 1; n <= n_max; n = n < 4 ? n + 1 : n * 2) {
    // Locality chunks: consecutive devices (same node first) form a pipeline.
    structure s;
    for (std::size_t i = 0; i < order.size(); i += n)
      s.emplace_back(order.begin() + i, order.begin() + std::min(order.size(), i + n));
    // Power-balanced groups (HetPipe-like): fastest devices dealt out in a snake.
    const std::size_t groups = (order.size() + n - 1) / n;
    std::vector<int> by_speed = order;
    std::stable_sort(by_speed.begin(), by_speed.end(), [&](int a, int b) { return d[a].speed > d[b].speed; });
    structure snake(groups);
    for (std::size_t i = 0; i < by_speed.size(); ++i) {
      const std::size_t round = i / groups, k = i % groups;
      snake[round % 2 ? groups - 1 - k : k].push_back(by_speed[i]);
    }
    for (auto& g : snake) std::sort(g.begin(), g.end());
    for (structure* cand : {&s, &snake}) {
      const auto sc = ev.score(*cand);
      if (sc.feasible()) ranked.emplace_back(sc.score, std::move(*cand));
    }
    // The fastest n * G devices as G power-balanced pipelines of n: slow devices may cost
    // more in sync and links than they add.
    for (std::size_t g = 1; g * n < by_speed.size(); g = g < 4 ? g + 1 : g * 2) {
      structure few(g);
      for (std::size_t i = 0; i < g * n; ++i) {
        const std::size_t round = i / g, k = i % g;
        few[round % 2 ? g - 1 - k : k].push_back(by_speed[i]);
      }
      for (auto& grp : few)
        std::stable_sort(grp.begin(), grp.end(), [&](int a, int b) { return d[a].node < d[b].node; });
      const auto sc = ev.score(few);
      if (sc.feasible()) ranked.emplace_back(sc.score, std::move(few));
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<structure> out;
  for (auto& [sc, st] : ranked) {
    if (out.size() >= keep) break;
    if (std::find(out.begin(), out.end(), st) == out.end()) out.push_back(std::move(st));
  }
  return out;
}

namespace {

// The neighbourhood of one structure, addressed by index so that a large one can be sampled.
class neighbourhood {
 public:
  neighbourhood(const structure& s, const std::vector<int>& available, int max_stages) : s_(s), max_stages_(max_stages) {
    std::vector<char> used;
    for (std::size_t g = 0; g < s.size(); ++g)
      for (std::size_t k = 0; k < s[g].size(); ++k) {
        flat_.push_back({static_cast<int>(g), static_cast<int>(k)});
        slots_.push_back({static_cast<int>(g), static_cast<int>(k)});
      }
    for (std::size_t g = 0; g < s.size(); ++g) slots_.push_back({static_cast<int>(g), static_cast<int>(s[g].size())});
    std::vector<int> in_use;
    for (const auto& g : s) in_use.insert(in_use.end(), g.begin(), g.end());
    std::sort(in_use.begin(), in_use.end());
    for (int d : available)
      if (!std::binary_search(in_use.begin(), in_use.end(), d)) unused_.push_back(d);
    const std::uint64_t N = flat_.size(), U = unused_.size(), S = slots_.size(), G = s.size();
    sizes_ = {N, U, U * S, N * S, N, N, G * G, N * U, N * N, N};
    total_ = std::accumulate(sizes_.begin(), sizes_.end(), std::uint64_t{0});
  }
  std::uint64_t size() const { return total_; }

  // Applies move `i`; false when it is a no-op or not allowed.
  bool apply(std::uint64_t i, structure& out) const {
    std::size_t cat = 0;
    while (i >= sizes_[cat]) i -= sizes_[cat++];
    out = s_;
    switch (cat) {
      case 0: {  // remove a device
        auto [g, k] = flat_[i];
        out[g].erase(out[g].begin() + k);
        break;
      }
      case 1:  // add an unused device as a new group
        out.push_back({unused_[i]});
        break;
      case 2: {  // add an unused device into a group at a position
        auto [g, k] = slots_[i % slots_.size()];
        out[g].insert(out[g].begin() + k, unused_[i / slots_.size()]);
        break;
      }
      case 3: {  // move a device to another place (another group, or along its own chain)
        auto [g, k] = flat_[i / slots_.size()];
        auto [tg, tk] = slots_[i % slots_.size()];
        const int d = out[g][k];
        if (tg == g && (tk == k || tk == k + 1)) return false;
        out[g].erase(out[g].begin() + k);
        if (tg == g && tk > k) --tk;
        out[tg].insert(out[tg].begin() + tk, d);
        break;
      }
      case 4: {  // swap neighbours in a chain
        auto [g, k] = flat_[i];
        if (k + 1 >= static_cast<int>(out[g].size())) return false;
        std::swap(out[g][k], out[g][k + 1]);
        break;
      }
      case 5: {  // split a group before position k
        auto [g, k] = flat_[i];
        if (k == 0) return false;
        out.emplace_back(out[g].begin() + k, out[g].end());
        out[g].resize(k);
        break;
      }
      case 6: {  // merge two groups into one chain
        const int a = static_cast<int>(i / s_.size()), b = static_cast<int>(i % s_.size());
        if (a == b) return false;
        out[a].insert(out[a].end(), out[b].begin(), out[b].end());
        out.erase(out.begin() + b);
        break;
      }
      case 7: {  // exchange a used device for an unused one, in place
        auto [g, k] = flat_[i / unused_.size()];
        out[g][k] = unused_[i % unused_.size()];
        break;
      }
      case 9: {  // rotate a chain so that it starts at position k (k = 0: reverse it)
        auto [g, k] = flat_[i];
        if (k == 0) std::reverse(out[g].begin(), out[g].end());
        else std::rotate(out[g].begin(), out[g].begin() + k, out[g].end());
        if (out[g].size() < 3) return false;  // a neighbour swap already covers it
        break;
      }
      case 8: {  // swap two used devices anywhere (across groups too)
        const std::size_t a = i / flat_.size(), b = i % flat_.size();
        if (a >= b) return false;
        std::swap(out[flat_[a].first][flat_[a].second], out[flat_[b].first][flat_[b].second]);
        break;
      }
    }
    for (const auto& g : out)
      if (static_cast<int>(g.size()) > max_stages_) return false;
    out.erase(std::remove_if(out.begin(), out.end(), [](const auto& g) { return g.empty(); }), out.end());
    return !out.empty();
  }

 private:
  const structure& s_;
  int max_stages_;
  std::vector<std::pair<int, int>> flat_, slots_;
  std::vector<int> unused_;
  std::vector<std::uint64_t> sizes_;
  std::uint64_t total_ = 0;
};

// Canonical form so that the elite list holds distinct structures.
structure canonical(structure s) {
  std::sort(s.begin(), s.end());
  return s;
}

}  // namespace

namespace {

// Best-improvement descent from `cur` until a local optimum or `budget_end` evaluations.
structure local_search(structure_evaluator& ev, structure cur, int budget_end, std::int64_t slot, int& moves,
                       const std::function<void(const structure&, double)>& remember) {
  const problem& p = ev.prob();
  const int max_stages = std::min(p.cfg.max_stages, p.num_layers());
  structure_score cur_score = ev.score(cur);
  remember(cur, cur_score.score);
  rng random(p.cfg.seed ^ (static_cast<std::uint64_t>(slot) * 0x9e3779b97f4a7c15ULL) ^ static_cast<std::uint64_t>(budget_end));
  structure cand;
  while (ev.evaluations() < budget_end) {
    neighbourhood nb(cur, p.available, max_stages);
    const std::uint64_t left = static_cast<std::uint64_t>(budget_end - ev.evaluations());
    const bool sample = nb.size() > left;
    structure best;
    structure_score best_score = cur_score;
    const std::uint64_t tries = sample ? left : nb.size();
    for (std::uint64_t t = 0; t < tries && ev.evaluations() < budget_end; ++t) {
      const std::uint64_t i = sample ? random.below(nb.size()) : t;
      if (!nb.apply(i, cand)) continue;
      const auto sc = ev.score(cand);
      remember(cand, sc.score);
      if (sc.score < best_score.score * (1 - 1e-9)) { best_score = sc; best = cand; }
    }
    if (best.empty()) break;  // a local optimum (or the budget ran out without a better move)
    cur = std::move(best);
    cur_score = best_score;
    ++moves;
  }
  return cur;
}

}  // namespace

result<search_result> tentative_search(structure_evaluator& ev, structure start, std::int64_t slot, int budget) {
  const problem& p = ev.prob();
  if (p.available.empty()) return make_error("infeasible", "no device is available");
  std::map<double, structure> elite;  // few best distinct structures by continuous score
  auto remember = [&](const structure& s, double sc) {
    if (!std::isfinite(sc)) return;
    elite.emplace(sc, canonical(s));
    if (elite.size() > 6) elite.erase(std::prev(elite.end()));
  };
  search_result out;
  const int budget_end = ev.evaluations() + budget;
  // Starts: the warm one alone when it is still feasible and budget is tight; otherwise the
  // warm one and the best cold candidates, each descending on a share of the budget.
  std::vector<structure> starts;
  const bool warm = !start.empty() && ev.score(start).feasible();
  if (warm) starts.push_back(std::move(start));
  if (!warm || budget > p.cfg.warm_eval_budget) {
    for (auto& s : cold_starts(ev, warm ? 4 : 6)) starts.push_back(std::move(s));
  }
  // Descents from every start on a budget share (half the budget when kicks may follow).
  const int descent_end = warm && starts.size() == 1 ? budget_end : ev.evaluations() + budget / 2;
  structure best;
  double best_score = unlimited;
  for (std::size_t k = 0; k < starts.size() && ev.evaluations() < descent_end; ++k) {
    const int left = descent_end - ev.evaluations();
    const int share = k + 1 == starts.size() ? left : left / static_cast<int>(starts.size() - k);
    structure s = local_search(ev, starts[k], ev.evaluations() + share, slot, out.moves, remember);
    const double sc = ev.score(s).score;
    if (sc < best_score) { best_score = sc; best = std::move(s); }
  }
  // Iterated local search with what is left: 2-4 random moves from the best, then descend.
  rng kick_rng(p.cfg.seed * 0x2545f4914f6cdd1dULL + static_cast<std::uint64_t>(slot));
  const int max_stages = std::min(p.cfg.max_stages, p.num_layers());
  // Until the budget is spent or `search_stall_kicks` kicks in a row found nothing better: a
  // small cluster's space is searched through long before 20 000 evaluations, and the
  // driver waits for the decision.
  for (int stall = 0; !best.empty() && ev.evaluations() < budget_end && stall < p.cfg.search_stall_kicks; ++stall) {
    structure kicked = best, next;
    const int kick = 2 + static_cast<int>(kick_rng.below(3));
    for (int m = 0; m < kick; ++m) {
      neighbourhood nb(kicked, p.available, max_stages);
      for (int tries = 0; tries < 20 && nb.size() > 0; ++tries)
        if (nb.apply(kick_rng.below(nb.size()), next)) { kicked = next; break; }
    }
    structure s = local_search(ev, kicked, budget_end, slot, out.moves, remember);
    const double sc = ev.score(s).score;
    if (sc < best_score * (1 - 1e-9)) { best_score = sc; best = std::move(s); stall = -1; }
  }
  // Exact pricing of the few best: the continuous model ignores integer micro-batch steps.
  double best_exact = unlimited;
  for (const auto& [sc, s] : elite) {
    auto pl = ev.materialize(s, slot);
    if (!pl) continue;
    const auto exact = ev.score_exact(*pl);
    if (exact < best_exact) { best_exact = exact; out.best = std::move(*pl); }
  }
  if (!std::isfinite(best_exact)) return make_error("infeasible", "no grouping of the available devices fits the model in memory with this batch");
  // Hysteresis: a different structure must beat the warm one clearly, or noise in the
  // estimates makes plans (and layers) flap back and forth. The warm one is the better of
  // its devices re-partitioned and the previous plan's own splits re-shared: a partition
  // chosen for the pipelines' pace alone may move layers for a worse step (sums split
  // across more holders, a 1F1B round trip the partitioner does not weigh).
  if (warm) {
    std::optional<plan> kept;
    double kept_score = unlimited;
    auto consider = [&](std::optional<plan> pl) {
      if (!pl) return;
      const double sc = ev.score_exact(*pl);
      if (sc < kept_score) { kept_score = sc; kept = std::move(pl); }
    };
    if (auto m = ev.materialize(starts.front(), slot)) consider(std::move(*m));
    if (ev.previous()) consider(layout_keeping(p, *ev.previous()));
    if (kept && kept_score <= best_exact * (1 + p.cfg.replan_margin)) {
      out.best = std::move(*kept);
      out.best.slot = slot;
    }
  }
  out.evaluations = ev.evaluations();
  return out;
}

}  // namespace dynapar::planner
