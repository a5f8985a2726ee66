// Envelope <-> bytes (Cap'n Proto flat array). Decoding never throws and never trusts its
// input: sizes, traversal, list lengths, version and every field are checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/result.hpp"
#include "wire/messages.hpp"

namespace dynapar::wire {

struct decode_limits {
  std::size_t max_bytes = 64u << 20;          // whole message
  std::uint64_t traversal_words = 1u << 20;   // Cap'n Proto traversal limit (8 MiB)
  std::size_t max_list = 65536;               // any list: groups, devices, stages
  std::size_t max_text = 1024;                // names, reasons
};

std::vector<std::uint8_t> encode(const envelope& e);

// Error codes: "empty", "too_large", "truncated", "malformed", "version", and the
// validation codes of validate_body ("bad_plan", "bad_field", "too_large").
result<envelope> decode(const std::uint8_t* data, std::size_t size, const decode_limits& limits = {});

// Semantic checks on a decoded body (also usable on locally built messages).
status validate_body(const body& b, const decode_limits& limits = {});
// The device call's part of it (validate_call.cpp).
status validate_call(const device_call& c);
// The data frames that came with a call, by their sizes: one per tensor the call announces,
// each holding exactly its element type's size times its shape's elements (at most 2^34).
// Checked before any frame is read as a tensor.
status check_tensor_frames(const device_call& c, const std::vector<std::size_t>& frame_bytes);

}  // namespace dynapar::wire
