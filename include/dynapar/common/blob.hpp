// Bytes that someone else owns: a tensor's storage on the way out, a received network frame
// on the way in. `owner` keeps them alive, so data moves between LibTorch and ZeroMQ without
// a copy in either direction.
#pragma once

#include <cstddef>
#include <memory>

namespace dynapar {

struct blob {
  const void* data = nullptr;
  std::size_t size = 0;
  std::shared_ptr<const void> owner;
};

}  // namespace dynapar
