// The syntax of a device's place (docs/GPU.md): "cpu" or "cuda:N". Whether this process can
// use it is model::check_place's question; this is shared by the config files and it.
#pragma once

#include <string>

namespace dynapar {

inline bool is_place(const std::string& p) {
  if (p == "cpu") return true;
  return p.size() > 5 && p.size() <= 8 && p.compare(0, 5, "cuda:") == 0 && p.find_first_not_of("0123456789", 5) == std::string::npos;
}

}  // namespace dynapar
