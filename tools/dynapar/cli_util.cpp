#include "cli_util.hpp"

#include <iostream>

#include "commands.hpp"

namespace dynapar::cli {

int report_exit(const error& e) {
  const bool input = e.code.rfind("bad_", 0) == 0 || e.code == "io" || e.code.rfind("unknown_", 0) == 0;
  return input ? exit_usage : exit_failed;
}

int report(const error& e) {
  std::cerr << "dynapar: " << e.message << "\n";
  return report_exit(e);
}

}  // namespace dynapar::cli
