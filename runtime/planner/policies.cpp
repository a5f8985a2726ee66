// The policies behind make_policy: baselines, the joint planner variants and the oracle.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "planner/partition.hpp"
#include "planner/policy.hpp"
#include "planner/search.hpp"
#include "planner/water_fill.hpp"

namespace dynapar::planner {
namespace {

bool all_available(const problem& p, const plan& pl) {
  for (const auto& g : pl.groups)
    for (int id : g.devices) {
      const int i = p.links.index_of(id);
      if (i < 0 || !p.cluster.devices[i].available) return false;
    }
  return true;
}

plan restamp(plan pl, std::int64_t slot) {
  pl.slot = slot;
  return pl;
}

// Single-device groups over every available device that can hold the whole model.
std::vector<group_shape> data_parallel_shapes(const problem& p) {
  std::vector<group_shape> out;
  for (int d : p.available)
    if (auto s = best_shape(p, {d}, p.cfg.batch)) out.push_back(std::move(*s));
  return out;
}

result<plan> to_plan(const problem& p, const std::vector<group_shape>& shapes, const std::vector<int>& shares,
                     std::int64_t slot) {
  plan out;
  out.slot = slot;
  out.schedule = p.cfg.schedule;
  for (std::size_t g = 0; g < shapes.size(); ++g) {
    if (shares[g] <= 0) continue;
    if (shares[g] > shapes[g].cap)
      return make_error("infeasible", "an equal share does not fit the memory of device " +
                                          std::to_string(p.cluster.devices[shapes[g].devices[0]].id));
    group_plan gp;
    for (int d : shapes[g].devices) gp.devices.push_back(p.cluster.devices[d].id);
    gp.splits = shapes[g].splits;
    gp.share = shares[g];
    gp.micro_batch = std::min(shapes[g].micro_batch, shares[g]);
    out.groups.push_back(std::move(gp));
  }
  return out;
}

std::vector<int> equal_shares(int batch, std::size_t groups, int quantum) {
  const int units = batch / quantum;
  std::vector<int> s(groups, units / static_cast<int>(groups));
  for (int r = 0; r < units % static_cast<int>(groups); ++r) ++s[r];
  for (auto& x : s) x *= quantum;
  return s;
}

result<std::vector<int>> balanced_shares(const problem& p, const std::vector<group_shape>& shapes) {
  std::vector<std::function<double(int)>> time;
  std::vector<int> caps;
  for (const auto& s : shapes) {
    time.push_back([&p, &s](int b) { return group_time(p, s, b); });
    caps.push_back(static_cast<int>(std::min<double>(s.cap, p.cfg.batch)));
  }
  return integer_shares(time, caps, p.cfg.batch, p.cfg.share_quantum);
}

// dp_dispatch: dp_balanced's plan, with the within-step dispatch joint_lyapunov uses (a probe
// of each share, the rest handed out as devices finish), so that a comparison tells the plan's
// worth from the dispatch's (docs/MODEL.md).
class dp_policy : public policy {
 public:
  explicit dp_policy(bool balanced, bool dispatch = false) : balanced_(balanced), dispatch_(dispatch) {}
  std::string name() const override { return dispatch_ ? "dp_dispatch" : balanced_ ? "dp_balanced" : "dp_even"; }
  bool dispatches() const override { return dispatch_; }
  result<plan> decide(const decision_context& ctx) override {
    const auto shapes = data_parallel_shapes(ctx.prob);
    if (shapes.empty()) return make_error("infeasible", "no available device holds the whole model (data parallelism needs one that does)");
    if (!balanced_) return to_plan(ctx.prob, shapes, equal_shares(ctx.prob.cfg.batch, shapes.size(), ctx.prob.cfg.share_quantum), ctx.slot);
    auto shares = balanced_shares(ctx.prob, shapes);
    if (!shares) return shares.err();
    return to_plan(ctx.prob, shapes, *shares, ctx.slot);
  }

 private:
  bool balanced_, dispatch_;
};

// One pipeline over the available devices in id order (at most one device per layer).
class pipeline_policy : public policy {
 public:
  explicit pipeline_policy(bool balanced) : balanced_(balanced) {}
  std::string name() const override { return balanced_ ? "pipeline_balanced" : "pipeline_even"; }
  bool dispatches() const override { return false; }
  result<plan> decide(const decision_context& ctx) override {
    const problem& p = ctx.prob;
    std::vector<int> devs = p.available;
    if (devs.empty()) return make_error("infeasible", "no device is available");
    const int L = p.num_layers();
    if (static_cast<int>(devs.size()) > std::min(L, p.cfg.max_stages)) {
      // Keep the fastest, in id order: more stages than layers cannot be used.
      std::stable_sort(devs.begin(), devs.end(), [&](int a, int b) { return p.speed(a) > p.speed(b); });
      devs.resize(std::min(L, p.cfg.max_stages));
      std::sort(devs.begin(), devs.end());
    }
    const int n = static_cast<int>(devs.size());
    std::vector<int> candidates = p.cfg.micro_batch > 0 ? std::vector<int>{p.cfg.micro_batch} : p.cfg.micro_batch_candidates;
    std::optional<group_shape> best;
    for (int u : candidates) {
      if (u > p.cfg.batch) continue;
      std::vector<int> splits(n + 1);
      if (balanced_) {
        auto s = partition_layers(p, devs, u);
        if (!s) continue;
        splits = *s;
      } else {
        for (int j = 0; j <= n; ++j) splits[j] = static_cast<int>(std::lround(static_cast<double>(j) * L / n));
      }
      auto g = make_shape(p, devs, splits, u);
      if (!g.feasible || g.cap < p.cfg.batch) continue;
      if (!best || group_time(p, g, p.cfg.batch) < group_time(p, *best, p.cfg.batch)) best = std::move(g);
    }
    if (!best) return make_error("infeasible", name() + ": no micro-batch size fits the stages in memory");
    return to_plan(p, {*best}, {p.cfg.batch}, ctx.slot);
  }

 private:
  bool balanced_;
};

// HetPipe (Park et al., USENIX ATC 2020) as it sets itself up: one virtual worker per node,
// its (heterogeneous) GPUs pipelining the model with a heterogeneity-aware partition; data
// parallelism across virtual workers with equal minibatches; planned once, and formed again
// only when one of its devices disappears. A node whose devices cannot hold the model joins
// the next node's virtual worker; a node with more devices than layers uses its fastest.
class hetpipe_static : public policy {
 public:
  std::string name() const override { return "hetpipe_static"; }
  bool dispatches() const override { return false; }
  result<plan> decide(const decision_context& ctx) override {
    const problem& p = ctx.prob;
    if (kept_ && all_available(p, *kept_)) return restamp(*kept_, ctx.slot);
    if (p.available.empty()) return make_error("infeasible", "no device is available");
    std::map<std::pair<int, int>, std::vector<int>> nodes;  // (rack, node) -> devices, in id order
    for (int d : p.available) {
      const auto& dev = p.cluster.devices[d];
      nodes[{dev.rack, dev.node >= 0 ? dev.node : -1 - d}].push_back(d);
    }
    const int most = std::min(p.num_layers(), p.cfg.max_stages);
    std::vector<std::vector<int>> workers;
    std::vector<int> carry;
    for (auto& [key, devs] : nodes) {
      carry.insert(carry.end(), devs.begin(), devs.end());
      if (static_cast<int>(carry.size()) > most) {
        std::stable_sort(carry.begin(), carry.end(), [&](int a, int b) { return p.speed(a) > p.speed(b); });
        carry.resize(most);
        std::sort(carry.begin(), carry.end());
      }
      if (best_shape(p, carry, static_cast<double>(p.cfg.batch) / static_cast<double>(nodes.size()))) {
        workers.push_back(std::move(carry));
        carry.clear();
      }
    }
    if (!carry.empty() && !workers.empty()) {  // the last nodes' devices join the last worker
      auto& last = workers.back();
      last.insert(last.end(), carry.begin(), carry.end());
      if (static_cast<int>(last.size()) > most) {
        std::stable_sort(last.begin(), last.end(), [&](int a, int b) { return p.speed(a) > p.speed(b); });
        last.resize(most);
      }
      std::sort(last.begin(), last.end());
    }
    if (workers.empty()) return make_error("infeasible", "hetpipe_static: the devices together cannot hold the model");
    const auto shares = equal_shares(p.cfg.batch, workers.size(), p.cfg.share_quantum);
    std::vector<group_shape> shapes;
    for (std::size_t w = 0; w < workers.size(); ++w) {
      auto s = best_shape(p, workers[w], static_cast<double>(shares[w]));
      if (!s) return make_error("infeasible", "hetpipe_static: a virtual worker cannot take an equal share of the batch in memory");
      shapes.push_back(std::move(*s));
    }
    auto pl = to_plan(p, shapes, shares, ctx.slot);
    if (pl) kept_ = *pl;
    return pl;
  }

 private:
  std::optional<plan> kept_;
};

// The full planner: every slot (greedy: queues ignored; lyapunov: with queues) or once.
class joint_policy : public policy {
 public:
  enum class mode { once, greedy, lyapunov };
  explicit joint_policy(mode m) : mode_(m) {}
  std::string name() const override {
    return mode_ == mode::once ? "joint_static" : mode_ == mode::greedy ? "joint_greedy" : "joint_lyapunov";
  }
  result<plan> decide(const decision_context& ctx) override {
    const problem& p = ctx.prob;
    if (mode_ == mode::once && kept_ && all_available(p, *kept_)) return restamp(*kept_, ctx.slot);
    queue_state q = mode_ == mode::lyapunov ? ctx.queues : queue_state{};
    structure_evaluator ev(p, ctx.previous, q);
    structure start = ctx.previous ? warm_start(p, *ctx.previous) : structure{};
    // The small per-slot budget only while the devices are the ones the last search saw.
    const bool same_devices = ctx.previous && p.available == last_available_;
    last_available_ = p.available;
    // An evaluation costs O(devices): small clusters afford more of them (x4 up to 16 devices).
    const int n = std::max<int>(16, static_cast<int>(p.available.size()));
    const int fresh = std::max(p.cfg.warm_eval_budget, static_cast<int>(static_cast<long>(p.cfg.eval_budget) * 64 / n));
    // Also when the cost queue moved by more than `research_queue_shift` budgets since the
    // last full search: the score weighs cost anew, and a warm descent from a plan chosen
    // under the old weights stays near it (docs/MODEL.md, "Tentative search").
    const bool refresh = std::abs(q.cost - searched_queue_) > p.cfg.research_queue_shift;
    if (!same_devices || refresh) searched_queue_ = q.cost;
    auto r = tentative_search(ev, std::move(start), ctx.slot, same_devices && !refresh ? p.cfg.warm_eval_budget : fresh);
    if (!r) return r.err();
    kept_ = r->best;
    return r->best;
  }

 private:
  mode mode_;
  std::optional<plan> kept_;
  std::vector<int> last_available_;
  double searched_queue_ = 0;
};

// Exhaustive: every subset of devices, every set of ordered chains over it.
class oracle_policy : public policy {
 public:
  std::string name() const override { return "oracle"; }
  result<plan> decide(const decision_context& ctx) override {
    const problem& p = ctx.prob;
    const int n = static_cast<int>(p.available.size());
    if (n == 0) return make_error("infeasible", "no device is available");
    if (n > oracle_max_devices)
      return make_error("too_large", "the oracle enumerates at most " + std::to_string(oracle_max_devices) +
                                         " devices exhaustively; this slot has " + std::to_string(n));
    structure_evaluator ev(p, ctx.previous, ctx.queues);
    double best_score = unlimited;
    std::optional<plan> best;
    structure cur;
    const int max_len = std::min(p.num_layers(), p.cfg.max_stages);
    // Place devices one by one: skip it, start a new chain, or insert into an existing chain.
    std::function<void(int)> place = [&](int k) {
      if (k == n) {
        if (cur.empty()) return;
        auto pl = ev.materialize(cur, ctx.slot);
        if (!pl) return;
        const double s = ev.score_exact(*pl);
        if (s < best_score) { best_score = s; best = std::move(*pl); }
        return;
      }
      const int d = p.available[k];
      place(k + 1);
      cur.push_back({d});
      place(k + 1);
      cur.pop_back();
      for (std::size_t g = 0; g < cur.size(); ++g) {
        if (static_cast<int>(cur[g].size()) >= max_len) continue;
        for (std::size_t pos = 0; pos <= cur[g].size(); ++pos) {
          cur[g].insert(cur[g].begin() + pos, d);
          place(k + 1);
          cur[g].erase(cur[g].begin() + pos);
        }
      }
    };
    place(0);
    if (!best) return make_error("infeasible", "no grouping of the available devices fits the model in memory");
    return *best;
  }
};

}  // namespace

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"dp_even",           "dp_balanced",    "dp_dispatch",  "pipeline_even",
                                                 "pipeline_balanced", "hetpipe_static", "joint_static", "joint_greedy",
                                                 "joint_lyapunov",    "oracle"};
  return names;
}

result<std::unique_ptr<policy>> make_policy(const std::string& name) {
  std::unique_ptr<policy> p;
  if (name == "dp_even") p = std::make_unique<dp_policy>(false);
  else if (name == "dp_balanced") p = std::make_unique<dp_policy>(true);
  else if (name == "dp_dispatch") p = std::make_unique<dp_policy>(true, true);
  else if (name == "pipeline_even") p = std::make_unique<pipeline_policy>(false);
  else if (name == "pipeline_balanced") p = std::make_unique<pipeline_policy>(true);
  else if (name == "hetpipe_static") p = std::make_unique<hetpipe_static>();
  else if (name == "joint_static") p = std::make_unique<joint_policy>(joint_policy::mode::once);
  else if (name == "joint_greedy") p = std::make_unique<joint_policy>(joint_policy::mode::greedy);
  else if (name == "joint_lyapunov") p = std::make_unique<joint_policy>(joint_policy::mode::lyapunov);
  else if (name == "oracle") p = std::make_unique<oracle_policy>();
  else {
    std::string known;
    for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error("unknown_policy", "unknown policy '" + name + "' (known: " + known + ")");
  }
  return p;
}

}  // namespace dynapar::planner
