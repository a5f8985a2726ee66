// libFuzzer entry: a received packet (a header and its data frames' sizes, frame_input.hpp)
// through what a node or the controller checks before it reads a frame as a tensor: the
// header's decoder, then the frames against the tensors the call announces. Shapes whose
// element counts overflow, unknown element types and frame counts that disagree must come
// out as errors (UBSan watches the arithmetic).
#include <cstddef>
#include <cstdint>

#include "frame_input.hpp"
#include "wire/codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dynapar;
  const auto in = fuzz::split(data, size);
  if (!in) return 0;
  const auto env = wire::decode(in->header, in->header_size);
  if (!env) return 0;
  const auto* call = std::get_if<wire::device_call>(&env->msg);
  (void)wire::check_tensor_frames(call ? *call : wire::device_call{}, in->frames);
  return 0;
}
