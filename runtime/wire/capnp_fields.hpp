// Inside runtime/wire only: reading Cap'n Proto fields into plain values. A field that cannot
// become one throws `reject`, which decode() catches and returns as an error value.
#pragma once

#include <capnp/blob.h>

#include <climits>
#include <cstdint>
#include <string>

#include "control.capnp.h"
#include "wire/codec.hpp"

namespace dynapar::wire {

struct reject {
  std::string code, message;
};

template <class List>
void check_list(const List& l, const decode_limits& lim, const std::string& field) {
  if (l.size() > lim.max_list)
    throw reject{"too_large", field + " has " + std::to_string(l.size()) + " entries, more than the limit " + std::to_string(lim.max_list)};
}

inline std::string text(capnp::Text::Reader t, const decode_limits& lim, const std::string& field) {
  if (t.size() > lim.max_text)
    throw reject{"too_large", field + " is " + std::to_string(t.size()) + " bytes, more than the limit " + std::to_string(lim.max_text)};
  return std::string(t.cStr(), t.size());
}

inline int to_int(std::uint32_t v, const std::string& field) {
  if (v > static_cast<std::uint32_t>(INT_MAX)) throw reject{"bad_field", field + " is out of range"};
  return static_cast<int>(v);
}

inline std::int64_t to_int64(std::uint64_t v, const std::string& field) {
  if (v > static_cast<std::uint64_t>(INT64_MAX)) throw reject{"bad_field", field + " is out of range"};
  return static_cast<std::int64_t>(v);
}

// The device call (call_codec.cpp).
void write_call(schema::DeviceCall::Builder b, const device_call& c);
device_call read_call(schema::DeviceCall::Reader r, const decode_limits& lim);

}  // namespace dynapar::wire
