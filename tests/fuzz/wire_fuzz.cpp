// libFuzzer entry: any bytes into the control-plane decoder. It must return a value or an
// error, never crash, leak or read out of bounds (ASan and UBSan watch).
#include <cstddef>
#include <cstdint>

#include "wire/codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto r = dynapar::wire::decode(data, size);
  if (r) (void)dynapar::wire::encode(*r);
  return 0;
}
