// The input layout of frames_fuzz, shared with the seed writer: one received packet as its
// header bytes and its data frames' sizes (only the sizes are checked before a frame is read).
//   [u32 header size, little-endian][header][u8 frame count][frame count x u32 frame size]
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace dynapar::fuzz {

struct frame_input {
  const std::uint8_t* header = nullptr;
  std::size_t header_size = 0;
  std::vector<std::size_t> frames;
};

inline std::uint32_t read_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 | static_cast<std::uint32_t>(p[2]) << 16 |
         static_cast<std::uint32_t>(p[3]) << 24;
}

inline std::optional<frame_input> split(const std::uint8_t* d, std::size_t n) {
  if (n < 4) return std::nullopt;
  frame_input in;
  in.header_size = read_u32(d);
  if (in.header_size > n - 4) return std::nullopt;
  in.header = d + 4;
  std::size_t at = 4 + in.header_size;
  if (at >= n) return std::nullopt;
  const std::size_t count = d[at++];
  if ((n - at) / 4 < count) return std::nullopt;
  for (std::size_t i = 0; i < count; ++i, at += 4) in.frames.push_back(read_u32(d + at));
  return in;
}

inline std::vector<std::uint8_t> join(const std::vector<std::uint8_t>& header, const std::vector<std::uint32_t>& frames) {
  std::vector<std::uint8_t> out;
  auto put = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  put(static_cast<std::uint32_t>(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  out.push_back(static_cast<std::uint8_t>(frames.size()));
  for (auto f : frames) put(f);
  return out;
}

}  // namespace dynapar::fuzz
