// Typed, checked access to YAML maps: every error names the field's path ("devices[2].speed").
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::config {

// Thrown inside loaders only; each loader catches it and returns an error value.
struct field_error {
  std::string message;
};

class fields {
 public:
  fields(const YAML::Node& node, std::string path);
  // Rejects keys outside `allowed` so that typos do not pass silently, and keys given twice.
  void only(const std::vector<const char*>& allowed) const;
  bool has(const char* key) const;
  double number(const char* key, double fallback) const;
  double number(const char* key) const;  // required
  double positive(const char* key, double fallback) const;
  // One number or a list of 1..4096 numbers, each finite.
  std::vector<double> numbers(const char* key, std::vector<double> fallback) const;
  int integer(const char* key, int fallback) const;
  int integer(const char* key) const;
  bool boolean(const char* key, bool fallback) const;
  std::string text(const char* key, const std::string& fallback) const;
  std::string text(const char* key) const;
  YAML::Node child(const char* key) const { return node_[key]; }
  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const YAML::Node& node() const { return node_; }

 private:
  YAML::Node node_;
  std::string path_;
};

// Loads a YAML file, turning parse errors into values that name the file, line and column.
result<YAML::Node> load_yaml_file(const std::string& file);

// Loads `path` and parses it with parse(document, name), the name being the file's stem;
// errors are prefixed with the path.
template <class Parse>
auto load_document(const std::string& path, Parse parse) -> decltype(parse(YAML::Node{}, std::string{})) {
  auto doc = load_yaml_file(path);
  if (!doc) return doc.err();
  std::string name = path.substr(path.find_last_of('/') + 1);
  name = name.substr(0, name.find('.'));
  auto r = parse(*doc, name);
  if (!r) return make_error(r.err().code, path + ": " + r.err().message);
  return r;
}

}  // namespace dynapar::config
