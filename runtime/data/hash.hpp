// The fingerprint's hash (data/source.hpp): FNV-1a's constants over 8-byte words, so that one
// changed byte changes the value at a word a step. Header-only, standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dynapar::data {

struct hasher {
  std::uint64_t h = 1469598103934665603ull;
  void add(std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  }
  void add(const std::uint8_t* p, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      add(w);
    }
    for (; i < n; ++i) add(p[i]);
  }
  std::uint64_t value() const { return h == 0 ? 1 : h; }  // 0 means "no data" on the wire
};

}  // namespace dynapar::data
