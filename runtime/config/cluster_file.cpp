#include "config/cluster_file.hpp"

#include <vector>

#include "common/place.hpp"
#include "config/yaml_fields.hpp"

namespace dynapar::config {
namespace {
constexpr double gbps = 1e9 / 8;  // bytes/s per Gbit/s

planner::link_tier parse_tier(const fields& parent, const char* key, planner::link_tier fallback) {
  if (!parent.has(key)) return fallback;
  fields f(parent.child(key), parent.path(key));
  f.only({"bandwidth_gbps", "latency_us"});
  return {f.positive("bandwidth_gbps", fallback.bw / gbps) * gbps, f.number("latency_us", fallback.lat * 1e6) * 1e-6};
}

// "cpu" or "cuda:N": the syntax only; whether this machine has that GPU is the runtime's
// question (model::check_place).
std::string parse_place(const fields& f) {
  const std::string place = f.text("place", "cpu");
  if (!is_place(place)) throw field_error{"field '" + f.path("place") + "' must be 'cpu' or 'cuda:N', got '" + place + "'"};
  return place;
}

void parse_devices(const fields& top, planner::cluster_state& c, std::map<int, std::string>& places) {
  const YAML::Node list = top.child("devices");
  if (!list.IsSequence() || list.size() == 0) throw field_error{"field 'devices' must be a non-empty list"};
  int next_id = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    fields f(list[i], "devices[" + std::to_string(i) + "]");
    f.only({"id", "name", "count", "speed", "memory_gb", "price_per_hour", "power_w", "node", "rack", "nic_gbps",
            "available", "nodes_of", "place"});
    const std::string place = parse_place(f);
    const int count = f.integer("count", 1);
    if (count < 1 || count > 100000) throw field_error{"field '" + f.path("count") + "' must be in 1..100000"};
    const int first = f.integer("id", next_id);
    if (first < 0 || first > 1'000'000) throw field_error{"field '" + f.path("id") + "' must be in 0..1000000"};
    if (c.devices.size() + static_cast<std::size_t>(count) > 100'000)
      throw field_error{"field 'devices' lists more than 100000 devices in all"};
    // nodes_of: k devices share one node, numbered from `node`; gives many-node clusters in one line.
    const int per_node = f.integer("nodes_of", 0);
    if (per_node < 0) throw field_error{"field '" + f.path("nodes_of") + "' must be >= 0"};
    for (int k = 0; k < count; ++k) {
      planner::device_spec d;
      d.id = first + k;
      d.name = f.text("name", "dev") + (count > 1 ? "-" + std::to_string(k) : "");
      d.speed = f.positive("speed", 1.0);
      d.memory_bytes = f.positive("memory_gb", 16) * 1e9;
      d.price_per_s = f.number("price_per_hour", 0) / 3600.0;
      if (d.price_per_s < 0) throw field_error{"field '" + f.path("price_per_hour") + "' must be >= 0"};
      d.power_w = f.number("power_w", 0);
      if (d.power_w < 0) throw field_error{"field '" + f.path("power_w") + "' must be >= 0"};
      const int node = f.integer("node", -1);
      d.node = per_node > 0 ? node + k / per_node : node;
      d.rack = f.integer("rack", 0);
      d.nic_bw = f.has("nic_gbps") ? f.positive("nic_gbps", 1) * gbps : planner::unlimited;
      d.available = f.boolean("available", true);
      if (place != "cpu") places[d.id] = place;
      c.devices.push_back(d);
    }
    next_id = first + count;
  }
}

}  // namespace

result<cluster_file> parse_cluster(const YAML::Node& doc, std::initializer_list<const char*> allowed_extra) {
  try {
    fields top(doc, "");
    std::vector<const char*> allowed = {"batch", "schedule", "micro_batch", "v", "eval_budget", "warm_eval_budget", "max_stages",
                                        "budget", "links", "devices", "checkpoint_gbps", "model", "seed", "overlap_sums", "dispatch_probe"};
    allowed.insert(allowed.end(), allowed_extra.begin(), allowed_extra.end());
    top.only(allowed);
    cluster_file out;
    auto& cfg = out.planner;
    cfg.batch = top.integer("batch", cfg.batch);
    // Upper bounds keep a mistyped file from asking for memory or search time no run needs.
    if (cfg.batch < 1 || cfg.batch > (1 << 20)) throw field_error{"field 'batch' must be in 1..1048576"};
    if (top.has("schedule")) {
      auto s = planner::parse_schedule(top.text("schedule"));
      if (!s) throw field_error{"field 'schedule': " + s.err().message};
      cfg.schedule = *s;
    }
    if (top.has("micro_batch") && top.text("micro_batch") != "auto") {
      cfg.micro_batch = top.integer("micro_batch");
      if (cfg.micro_batch < 1) throw field_error{"field 'micro_batch' must be 'auto' or an integer >= 1"};
    }
    cfg.v = top.positive("v", cfg.v);
    cfg.eval_budget = top.integer("eval_budget", cfg.eval_budget);
    if (cfg.eval_budget < 1 || cfg.eval_budget > 10'000'000) throw field_error{"field 'eval_budget' must be in 1..10000000"};
    cfg.warm_eval_budget = top.integer("warm_eval_budget", cfg.warm_eval_budget);
    if (cfg.warm_eval_budget < 1 || cfg.warm_eval_budget > 10'000'000)
      throw field_error{"field 'warm_eval_budget' must be in 1..10000000"};
    cfg.max_stages = top.integer("max_stages", cfg.max_stages);
    if (cfg.max_stages < 1 || cfg.max_stages > 1024) throw field_error{"field 'max_stages' must be in 1..1024"};
    cfg.seed = static_cast<std::uint64_t>(top.integer("seed", 1));
    cfg.overlap_sums = top.boolean("overlap_sums", cfg.overlap_sums);
    cfg.dispatch_probe = top.number("dispatch_probe", cfg.dispatch_probe);
    if (!(cfg.dispatch_probe >= 0 && cfg.dispatch_probe < 1))
      throw field_error{"field 'dispatch_probe' must be in [0, 1) (0: no within-step dispatch)"};
    out.model = top.text("model", "");
    if (top.has("budget")) {
      fields b(top.child("budget"), "budget");
      b.only({"cost_per_slot", "energy_per_slot", "slot_slack", "payback"});
      if (b.has("cost_per_slot")) out.budget.cost_per_slot = b.positive("cost_per_slot", 1);
      out.budget.slot_slack = b.number("slot_slack", out.budget.slot_slack);
      if (!(out.budget.slot_slack >= 0)) throw field_error{"field 'budget.slot_slack' must be >= 0"};
      out.budget.payback = b.number("payback", out.budget.payback);
      if (!(out.budget.payback >= 0 && out.budget.payback <= 1)) throw field_error{"field 'budget.payback' must be in [0, 1]"};
      if (b.has("energy_per_slot")) {
        fields e(b.child("energy_per_slot"), "budget.energy_per_slot");
        for (const auto& kv : e.node()) {
          const std::string key = kv.first.as<std::string>();
          int id;
          try {
            id = std::stoi(key);
          } catch (...) {
            throw field_error{"budget.energy_per_slot keys must be device ids, got '" + key + "'"};
          }
          out.budget.energy_per_slot.push_back({id, e.positive(key.c_str(), 1)});
        }
      }
    }
    if (top.has("links")) {
      fields l(top.child("links"), "links");
      l.only({"same_node", "same_rack", "cross_rack", "overrides"});
      auto& t = out.cluster.tiers;
      t.same_node = parse_tier(l, "same_node", t.same_node);
      t.same_rack = parse_tier(l, "same_rack", t.same_rack);
      t.cross_rack = parse_tier(l, "cross_rack", t.cross_rack);
      if (l.has("overrides")) {
        const YAML::Node ov = l.child("overrides");
        if (!ov.IsSequence()) throw field_error{"field 'links.overrides' must be a list"};
        for (std::size_t i = 0; i < ov.size(); ++i) {
          fields o(ov[i], "links.overrides[" + std::to_string(i) + "]");
          o.only({"a", "b", "bandwidth_gbps", "latency_us"});
          out.cluster.overrides.push_back({o.integer("a"), o.integer("b"), o.positive("bandwidth_gbps", 1) * gbps,
                                           o.number("latency_us", 0) * 1e-6});
        }
      }
    }
    out.cluster.checkpoint_bw = top.positive("checkpoint_gbps", out.cluster.checkpoint_bw / gbps) * gbps;
    parse_devices(top, out.cluster, out.places);
    if (auto s = planner::validate(out.cluster); !s) return s.err();
    for (const auto& e : out.budget.energy_per_slot) {
      bool known = false;
      for (const auto& d : out.cluster.devices) known = known || d.id == e.device_id;
      if (!known) throw field_error{"budget.energy_per_slot names unknown device id " + std::to_string(e.device_id)};
    }
    return out;
  } catch (const field_error& e) {
    return make_error("bad_config", e.message);
  } catch (const YAML::Exception& e) {
    return make_error("bad_config", std::string("malformed YAML: ") + e.what());
  }
}

result<cluster_file> load_cluster_file(const std::string& path) {
  return load_document(path, [](const YAML::Node& doc, const std::string&) { return parse_cluster(doc); });
}

}  // namespace dynapar::config
