#include "planner/plan.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

namespace dynapar::planner {

const char* to_string(schedule_kind s) {
  switch (s) {
    case schedule_kind::gpipe: return "gpipe";
    case schedule_kind::deep_1f1b: return "1f1b-deep";
    default: return "1f1b";
  }
}

result<schedule_kind> parse_schedule(const std::string& s) {
  if (s == "gpipe") return schedule_kind::gpipe;
  if (s == "1f1b") return schedule_kind::one_f_one_b;
  if (s == "1f1b-deep") return schedule_kind::deep_1f1b;
  return make_error("bad_schedule", "schedule must be 'gpipe', '1f1b' or '1f1b-deep', got '" + s + "'");
}

int warm_up(schedule_kind s, int stages, int stage) {
  return (s == schedule_kind::deep_1f1b ? 2 : 1) * (stages - stage - 1);
}

int micro_batches(int samples, int micro_batch) {
  const int u = std::max(1, micro_batch);
  return samples > 0 ? (samples + u - 1) / u : 0;
}

bool operator==(const group_plan& a, const group_plan& b) {
  return a.devices == b.devices && a.splits == b.splits && a.share == b.share && a.micro_batch == b.micro_batch;
}

bool plan::operator==(const plan& o) const { return slot == o.slot && schedule == o.schedule && groups == o.groups; }

status validate(const plan& p, int num_layers, int batch, const std::vector<int>& known_ids) {
  if (p.groups.empty()) return make_error("bad_plan", "plan.groups is empty");
  const std::unordered_set<int> known(known_ids.begin(), known_ids.end());
  std::unordered_set<int> seen;
  long total = 0;
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    const auto& gp = p.groups[g];
    const std::string where = "plan.groups[" + std::to_string(g) + "]";
    if (gp.devices.empty()) return make_error("bad_plan", where + ".devices is empty");
    if (gp.splits.size() != gp.devices.size() + 1)
      return make_error("bad_plan", where + ".splits must have one more entry than devices");
    if (gp.splits.front() != 0) return make_error("bad_plan", where + ".splits must start at 0");
    if (gp.splits.back() != num_layers)
      return make_error("bad_plan", where + ".splits must end at the model's layer count " + std::to_string(num_layers));
    for (std::size_t j = 1; j < gp.splits.size(); ++j)
      if (gp.splits[j] <= gp.splits[j - 1])
        return make_error("bad_plan", where + ".splits must be strictly increasing (index " + std::to_string(j) + ")");
    for (int d : gp.devices) {
      if (!known.empty() && !known.count(d))
        return make_error("bad_plan", where + ".devices names unknown device id " + std::to_string(d));
      if (!seen.insert(d).second) return make_error("bad_plan", where + ".devices repeats device id " + std::to_string(d));
    }
    if (gp.share < 1) return make_error("bad_plan", where + ".share must be >= 1");
    if (gp.micro_batch < 1) return make_error("bad_plan", where + ".micro_batch must be >= 1");
    total += gp.share;
  }
  if (total != batch)
    return make_error("bad_plan", "plan.groups shares sum to " + std::to_string(total) + ", not the batch " + std::to_string(batch));
  return ok_status();
}

std::string describe(const plan& p) {
  std::ostringstream os;
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    const auto& gp = p.groups[g];
    if (g) os << "; ";
    os << "g" << g << "[";
    for (std::size_t j = 0; j < gp.devices.size(); ++j) os << (j ? ">" : "") << gp.devices[j];
    os << " |";
    for (std::size_t j = 0; j < gp.splits.size(); ++j) os << (j ? "," : " ") << gp.splits[j];
    os << "] b=" << gp.share << " u=" << gp.micro_batch;
  }
  return os.str();
}

std::string brief(const plan& p) {
  std::string out;
  for (const auto& g : p.groups) {
    out += out.empty() ? "[" : " [";
    for (std::size_t j = 0; j < g.devices.size(); ++j) out += (j ? ">" : "") + std::to_string(g.devices[j]);
    out += "]:" + std::to_string(g.share);
  }
  return out;
}

namespace {
// layer -> device ids holding it, plan order.
std::map<int, std::vector<int>> placements(const plan& p) {
  std::map<int, std::vector<int>> out;
  for (const auto& g : p.groups)
    for (std::size_t j = 0; j + 1 < g.splits.size() && j < g.devices.size(); ++j)
      for (int l = g.splits[j]; l < g.splits[j + 1]; ++l) out[l].push_back(g.devices[j]);
  return out;
}

std::set<int> used(const plan& p) {
  std::set<int> out;
  for (const auto& g : p.groups) out.insert(g.devices.begin(), g.devices.end());
  return out;
}

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

plan_diff diff(const plan* from, const plan& to, const std::function<double(int, int)>& source_cost,
               const std::set<int>& wiped) {
  plan_diff d;
  auto old = from ? placements(*from) : std::map<int, std::vector<int>>{};
  for (auto& [layer, ids] : old)
    ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int id) { return wiped.count(id) > 0; }), ids.end());
  const auto next = placements(to);
  for (const auto& [layer, ids] : next) {
    const auto it = old.find(layer);
    for (int id : ids) {
      if (it != old.end() && has(it->second, id)) continue;
      layer_move m{layer, id, -1};
      if (it != old.end())
        for (int src : it->second)
          if (m.from < 0 || (source_cost && source_cost(src, id) < source_cost(m.from, id))) m.from = src;
      d.moves.push_back(m);
    }
  }
  for (const auto& [layer, ids] : old)
    for (int id : ids) {
      const auto it = next.find(layer);
      if (it == next.end() || !has(it->second, id)) d.drops.emplace_back(id, layer);
    }
  const auto a = from ? used(*from) : std::set<int>{};
  const auto b = used(to);
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(d.joined));
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(d.left));
  return d;
}

}  // namespace dynapar::planner
