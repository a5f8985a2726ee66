#include "config/scenario_file.hpp"

#include "config/cluster_file.hpp"
#include "config/profile_json.hpp"
#include "config/yaml_fields.hpp"
#include "planner/policy.hpp"

namespace dynapar::config {
namespace {

std::vector<sim::trace_point> parse_points(const YAML::Node& n, const std::string& where) {
  if (!n.IsSequence()) throw field_error{where + " must be a list of [slot, value] pairs"};
  std::vector<sim::trace_point> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!n[i].IsSequence() || n[i].size() != 2) throw field_error{at + " must be a [slot, value] pair"};
    sim::trace_point p;
    try {
      p.slot = n[i][0].as<int>();
      p.value = n[i][1].IsScalar() && (n[i][1].as<std::string>() == "true" || n[i][1].as<std::string>() == "false")
                    ? (n[i][1].as<bool>() ? 1.0 : 0.0)
                    : n[i][1].as<double>();
    } catch (const YAML::Exception&) {
      throw field_error{at + " must hold a slot number and a number (or true/false)"};
    }
    if (p.slot < 0 || (!out.empty() && p.slot <= out.back().slot)) throw field_error{at + " slots must increase from 0"};
    if (!(p.value >= 0)) throw field_error{at + " value must be >= 0"};
    out.push_back(p);
  }
  return out;
}

}  // namespace

void parse_dynamics(const fields& top, sim::scenario& s) {
  if (!top.has("dynamics")) return;
  fields d(top.child("dynamics"), "dynamics");
  d.only({"traces", "links", "events", "random_walk", "load_bursts", "spot_price", "departures"});
  auto known = [&](int id, const std::string& where) {
    for (const auto& dev : s.cluster.devices)
      if (dev.id == id) return;
    throw field_error{where + " names unknown device id " + std::to_string(id)};
  };
  if (d.has("traces")) {
    const auto list = d.child("traces");
    if (!list.IsSequence()) throw field_error{"dynamics.traces must be a list"};
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = "dynamics.traces[" + std::to_string(i) + "]";
      fields t(list[i], where);
      t.only({"device", "speed", "available", "price"});
      sim::device_trace tr;
      tr.device = t.integer("device");
      known(tr.device, where + ".device");
      if (t.has("speed")) tr.speed = parse_points(t.child("speed"), where + ".speed");
      if (t.has("available")) tr.available = parse_points(t.child("available"), where + ".available");
      if (t.has("price")) tr.price = parse_points(t.child("price"), where + ".price");
      for (const auto& p : tr.speed)
        if (!(p.value > 0)) throw field_error{where + ".speed multipliers must be > 0"};
      s.traces.push_back(std::move(tr));
    }
  }
  if (d.has("links")) {
    const auto list = d.child("links");
    if (!list.IsSequence()) throw field_error{"dynamics.links must be a list"};
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = "dynamics.links[" + std::to_string(i) + "]";
      fields t(list[i], where);
      t.only({"tier", "bandwidth"});
      sim::link_trace lt;
      const auto tier = t.text("tier");
      if (tier == "same_node") lt.scope = sim::link_scope::same_node;
      else if (tier == "same_rack") lt.scope = sim::link_scope::same_rack;
      else if (tier == "cross_rack") lt.scope = sim::link_scope::cross_rack;
      else throw field_error{where + ".tier must be same_node, same_rack or cross_rack"};
      lt.bandwidth = parse_points(t.child("bandwidth"), where + ".bandwidth");
      for (const auto& p : lt.bandwidth)
        if (!(p.value > 0)) throw field_error{where + ".bandwidth multipliers must be > 0"};
      s.link_traces.push_back(std::move(lt));
    }
  }
  if (d.has("events")) {
    const auto list = d.child("events");
    if (!list.IsSequence()) throw field_error{"dynamics.events must be a list"};
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = "dynamics.events[" + std::to_string(i) + "]";
      fields e(list[i], where);
      e.only({"slot", "kind", "device"});
      sim::event ev;
      ev.slot = e.integer("slot");
      if (ev.slot < 0) throw field_error{where + ".slot must be >= 0"};
      const auto kind = e.text("kind");
      if (kind == "join") ev.kind = sim::event_kind::join;
      else if (kind == "leave") ev.kind = sim::event_kind::leave;
      else if (kind == "fail") ev.kind = sim::event_kind::fail;
      else throw field_error{where + ".kind must be join, leave or fail"};
      ev.device = e.integer("device");
      known(ev.device, where + ".device");
      s.events.push_back(ev);
    }
  }
  auto& r = s.random;
  if (d.has("random_walk")) {
    fields f(d.child("random_walk"), "dynamics.random_walk");
    f.only({"sigma", "min", "max"});
    r.walk_sigma = f.number("sigma");
    r.walk_min = f.positive("min", r.walk_min);
    r.walk_max = f.positive("max", r.walk_max);
    if (r.walk_sigma < 0 || r.walk_min > r.walk_max) throw field_error{"dynamics.random_walk needs sigma >= 0 and min <= max"};
  }
  auto probability = [](const fields& f, const char* key, double fallback) {
    const double p = f.number(key, fallback);
    if (p < 0 || p > 1) throw field_error{"field '" + f.path(key) + "' must be a probability in [0, 1]"};
    return p;
  };
  if (d.has("load_bursts")) {
    fields f(d.child("load_bursts"), "dynamics.load_bursts");
    f.only({"p_start", "p_end", "slowdown"});
    r.burst_start = probability(f, "p_start", 0);
    r.burst_end = probability(f, "p_end", r.burst_end);
    r.burst_slowdown = f.positive("slowdown", r.burst_slowdown);
  }
  if (d.has("spot_price")) {
    fields f(d.child("spot_price"), "dynamics.spot_price");
    f.only({"p_change", "low", "high"});
    r.price_change = probability(f, "p_change", 0);
    r.price_low = f.positive("low", r.price_low);
    r.price_high = f.positive("high", r.price_high);
  }
  if (d.has("departures")) {
    fields f(d.child("departures"), "dynamics.departures");
    f.only({"rate", "rejoin_after"});
    r.departure_rate = probability(f, "rate", 0);
    r.rejoin_after = f.integer("rejoin_after", r.rejoin_after);
  }
}

result<sim::scenario> parse_scenario(const YAML::Node& doc, const std::string& name) {
  auto base = parse_cluster(doc, {"name", "slots", "policies", "noise", "smoothing", "detect_s", "dynamics", "hysteresis", "plan_lifetime_slots"});
  if (!base) return base.err();
  try {
    fields top(doc, "");
    sim::scenario s;
    s.name = top.text("name", name);
    s.cluster = std::move(base->cluster);
    s.cfg = base->planner;
    s.budget = base->budget;
    s.seed = s.cfg.seed;
    if (base->model.empty()) throw field_error{"missing field 'model' (a built-in profile name or a profile JSON path)"};
    auto model = load_profile(base->model);
    if (!model) return model.err();
    s.model = std::move(*model);
    s.slots = top.integer("slots", s.slots);
    if (s.slots < 1 || s.slots > 10000000) throw field_error{"field 'slots' must be in 1..10000000"};
    s.measurement_noise = top.number("noise", s.measurement_noise);
    if (s.measurement_noise < 0 || s.measurement_noise > 1) throw field_error{"field 'noise' must be in [0, 1]"};
    s.estimate_smoothing = top.number("smoothing", s.estimate_smoothing);
    if (!(s.estimate_smoothing > 0 && s.estimate_smoothing <= 1)) throw field_error{"field 'smoothing' must be in (0, 1]"};
    s.detect_s = top.number("detect_s", s.detect_s);
    if (s.detect_s < 0) throw field_error{"field 'detect_s' must be >= 0"};
    s.hysteresis = top.boolean("hysteresis", s.hysteresis);
    s.plan_lifetime_slots = top.number("plan_lifetime_slots", s.plan_lifetime_slots);
    if (!(s.plan_lifetime_slots >= 1 && s.plan_lifetime_slots <= 1e6))
      throw field_error{"field 'plan_lifetime_slots' must be in [1, 1000000]"};
    if (top.has("policies")) {
      const auto list = top.child("policies");
      if (!list.IsSequence()) throw field_error{"field 'policies' must be a list of policy names"};
      for (const auto& p : list) {
        const auto n = p.as<std::string>();
        if (!planner::make_policy(n)) throw field_error{"field 'policies': " + planner::make_policy(n).err().message};
        s.policies.push_back(n);
      }
    }
    parse_dynamics(top, s);
    if (auto v = planner::validate(s.model, s.cluster, s.cfg); !v) return v.err();
    return s;
  } catch (const field_error& e) {
    return make_error("bad_config", e.message);
  } catch (const YAML::Exception& e) {
    return make_error("bad_config", std::string("malformed YAML: ") + e.what());
  }
}

result<sim::scenario> load_scenario_file(const std::string& path) {
  return load_document(path, parse_scenario);
}

}  // namespace dynapar::config
