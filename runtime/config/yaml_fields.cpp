#include "config/yaml_fields.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

namespace dynapar::config {

fields::fields(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {
  if (!node_.IsMap()) throw field_error{(path_.empty() ? std::string("the document") : path_) + " must be a map"};
}

void fields::only(const std::vector<const char*>& allowed) const {
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    const auto key = kv.first.as<std::string>();
    // YAML parsers keep one of a repeated key's values: which one the user meant is unknowable.
    if (!seen.insert(key).second) throw field_error{"field '" + path(key) + "' is given twice"};
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw field_error{"unknown field '" + path(key) + "' (allowed: " + list + ")"};
    }
  }
}

bool fields::has(const char* key) const { return node_[key].IsDefined() && !node_[key].IsNull(); }

double fields::number(const char* key) const {
  if (!has(key)) throw field_error{"missing field '" + path(key) + "'"};
  try {
    const double v = node_[key].as<double>();
    if (!std::isfinite(v)) throw field_error{"field '" + path(key) + "' must be a finite number"};
    return v;
  } catch (const YAML::Exception&) {
    throw field_error{"field '" + path(key) + "' must be a number, got '" + node_[key].as<std::string>("?") + "'"};
  }
}

double fields::number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }

std::vector<double> fields::numbers(const char* key, std::vector<double> fallback) const {
  if (!has(key)) return fallback;
  const YAML::Node n = node_[key];
  if (!n.IsSequence()) return {number(key)};
  if (n.size() < 1 || n.size() > 4096) throw field_error{"field '" + path(key) + "' must be a number or a list of 1..4096 numbers"};
  std::vector<double> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string at = path(key) + "[" + std::to_string(i) + "]";
    try {
      out.push_back(n[i].as<double>());
    } catch (const YAML::Exception&) {
      throw field_error{"field '" + at + "' must be a number, got '" + n[i].as<std::string>("?") + "'"};
    }
    if (!std::isfinite(out.back())) throw field_error{"field '" + at + "' must be a finite number"};
  }
  return out;
}

double fields::positive(const char* key, double fallback) const {
  const double v = number(key, fallback);
  if (!(v > 0)) throw field_error{"field '" + path(key) + "' must be > 0"};
  return v;
}

int fields::integer(const char* key) const {
  const double v = number(key);
  if (v != std::floor(v) || std::abs(v) > 2e9) throw field_error{"field '" + path(key) + "' must be an integer"};
  return static_cast<int>(v);
}

int fields::integer(const char* key, int fallback) const { return has(key) ? integer(key) : fallback; }

bool fields::boolean(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  try {
    return node_[key].as<bool>();
  } catch (const YAML::Exception&) {
    throw field_error{"field '" + path(key) + "' must be true or false"};
  }
}

std::string fields::text(const char* key) const {
  if (!has(key)) throw field_error{"missing field '" + path(key) + "'"};
  if (!node_[key].IsScalar()) throw field_error{"field '" + path(key) + "' must be a string"};
  return node_[key].as<std::string>();
}

std::string fields::text(const char* key, const std::string& fallback) const { return has(key) ? text(key) : fallback; }

result<YAML::Node> load_yaml_file(const std::string& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) return make_error("io", "'" + file + "' is a directory, not a YAML file");
  std::ifstream in(file);
  if (!in) return make_error("io", "cannot open '" + file + "'");
  try {
    return YAML::Load(in);
  } catch (const YAML::ParserException& e) {
    return make_error("bad_yaml", file + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                                      ": " + e.msg);
  } catch (const std::exception& e) {  // a read that fails midway (a device, a vanished file)
    return make_error("io", "cannot read '" + file + "': " + e.what());
  }
}

}  // namespace dynapar::config
