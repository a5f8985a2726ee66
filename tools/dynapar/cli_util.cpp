#include "cli_util.hpp"

#include <iostream>

#include "commands.hpp"

namespace dynapar::cli {

int report(const error& e) {
  std::cerr << "dynapar: " << e.message << "\n";
  const bool input = e.code.rfind("bad_", 0) == 0 || e.code == "io" || e.code.rfind("unknown_", 0) == 0;
  return input ? exit_usage : exit_failed;
}

}  // namespace dynapar::cli
