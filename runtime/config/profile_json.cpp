#include "config/profile_json.hpp"

#include <cmath>
#include <fstream>

#include "planner/builtin_profiles.hpp"

namespace dynapar::config {
using nlohmann::json;

namespace {
result<double> number_at(const json& o, const char* key, const std::string& where, double fallback, bool required) {
  if (!o.contains(key)) {
    if (required) return make_error("bad_profile", "missing field '" + where + "." + key + "'");
    return fallback;
  }
  if (!o[key].is_number()) return make_error("bad_profile", "field '" + where + "." + key + "' must be a number");
  const double v = o[key].get<double>();
  if (!std::isfinite(v) || v < 0) return make_error("bad_profile", "field '" + where + "." + key + "' must be finite and >= 0");
  return v;
}
}  // namespace

result<planner::model_profile> profile_from_json(const json& j) {
  if (!j.is_object()) return make_error("bad_profile", "a profile must be a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "name" && it.key() != "optimizer_state_factor" && it.key() != "layers" && it.key() != "reference_flops_per_s")
      return make_error("bad_profile", "unknown field '" + it.key() + "'");
  planner::model_profile m;
  m.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : "custom";
  auto k = number_at(j, "optimizer_state_factor", "profile", 0, false);
  if (!k) return k.err();
  m.optimizer_state_factor = *k;
  auto rate = number_at(j, "reference_flops_per_s", "profile", 0, false);
  if (!rate) return rate.err();
  if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].empty())
    return make_error("bad_profile", "field 'layers' must be a non-empty array");
  for (std::size_t i = 0; i < j["layers"].size(); ++i) {
    const json& l = j["layers"][i];
    const std::string where = "layers[" + std::to_string(i) + "]";
    if (!l.is_object()) return make_error("bad_profile", where + " must be an object");
    static const char* known[] = {"name", "fwd_s", "bwd_s", "fwd_flops", "bwd_flops", "fixed_s", "act_bytes", "param_bytes", "act_mem_bytes", "update_s"};
    for (auto it = l.begin(); it != l.end(); ++it) {
      bool ok = false;
      for (const char* kn : known) ok = ok || it.key() == kn;
      if (!ok) return make_error("bad_profile", "unknown field '" + where + "." + it.key() + "'");
    }
    planner::layer_profile lp;
    lp.name = l.contains("name") && l["name"].is_string() ? l["name"].get<std::string>() : "layer" + std::to_string(i);
    // Times in seconds, or FLOPs turned into seconds by the reference rate.
    for (auto [key_s, key_f, out] : {std::tuple{"fwd_s", "fwd_flops", &lp.fwd_s}, std::tuple{"bwd_s", "bwd_flops", &lp.bwd_s}}) {
      if (l.contains(key_f)) {
        if (!(*rate > 0)) return make_error("bad_profile", where + "." + key_f + " needs reference_flops_per_s > 0");
        auto f = number_at(l, key_f, where, 0, true);
        if (!f) return f.err();
        *out = *f / *rate;
      } else {
        auto s = number_at(l, key_s, where, 0, true);
        if (!s) return s.err();
        *out = *s;
      }
    }
    for (auto [key, out] : {std::pair{"fixed_s", &lp.fixed_s}, std::pair{"act_bytes", &lp.act_bytes},
                            std::pair{"param_bytes", &lp.param_bytes}, std::pair{"act_mem_bytes", &lp.act_mem_bytes},
                            std::pair{"update_s", &lp.update_s}}) {
      auto v = number_at(l, key, where, 0, false);
      if (!v) return v.err();
      *out = *v;
    }
    m.layers.push_back(std::move(lp));
  }
  if (auto s = planner::validate(m); !s) return s.err();
  return m;
}

json profile_to_json(const planner::model_profile& m) {
  json layers = json::array();
  for (const auto& l : m.layers)
    layers.push_back({{"name", l.name}, {"fwd_s", l.fwd_s}, {"bwd_s", l.bwd_s}, {"fixed_s", l.fixed_s},
                      {"act_bytes", l.act_bytes}, {"param_bytes", l.param_bytes}, {"act_mem_bytes", l.act_mem_bytes}, {"update_s", l.update_s}});
  return {{"name", m.name}, {"optimizer_state_factor", m.optimizer_state_factor}, {"layers", layers}};
}

result<planner::model_profile> load_profile(const std::string& name_or_path) {
  for (const auto& n : planner::builtin_profile_names())
    if (n == name_or_path) return planner::builtin_profile(n);
  std::ifstream in(name_or_path);
  if (!in) {
    std::string known;
    for (const auto& n : planner::builtin_profile_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error("unknown_profile", "'" + name_or_path + "' is neither a built-in profile (" + known + ") nor a readable file");
  }
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    return make_error("bad_profile", name_or_path + ": malformed JSON: " + e.what());
  }
  auto r = profile_from_json(j);
  if (!r) return make_error(r.err().code, name_or_path + ": " + r.err().message);
  return r;
}

}  // namespace dynapar::config
