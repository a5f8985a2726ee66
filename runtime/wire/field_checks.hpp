// What the semantic checks of decoded messages (validate.cpp, validate_call.cpp) share.
#pragma once

#include <cmath>
#include <string>

#include "common/result.hpp"

namespace dynapar::wire::checks {

inline bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }
// A field that decoded but holds what no sender may send: named, with why.
inline status bad(const std::string& field, const std::string& why) { return make_error("bad_field", field + " " + why); }

}  // namespace dynapar::wire::checks
