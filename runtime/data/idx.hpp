// The idx format (LeCun's MNIST files), read from .gz through zlib into one buffer: no
// temporary files, no second copy. Errors name the file and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::data {

struct idx_file {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> values;  // unsigned bytes (type 0x08), row-major
};

result<idx_file> read_idx_gz(const std::string& path);

}  // namespace dynapar::data
