// `seed_corpus DIR`: the fuzzers' seeds (docs/TESTING.md). DIR/wire gets every control-plane
// body and every device operation encoded, each of the codec's message kinds once;
// DIR/frames gets each device operation again as a packet with 0, 1 and 2 tensor frames of
// the right sizes (frame_input.hpp). Seeds that decode send the fuzzers past the header
// checks into each kind's fields at once.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <variant>

#include "frame_input.hpp"
#include "wire/codec.hpp"

namespace {
using namespace dynapar;
namespace fs = std::filesystem;

int written = 0;

void write(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ++written;
}

template <class V, class F, std::size_t... I>
void each_kind(F f, std::index_sequence<I...>) {
  (f(V{std::in_place_index<I>}, I), ...);
}
template <class V, class F>
void each_kind(F f) {
  each_kind<V>(f, std::make_index_sequence<std::variant_size_v<V>>{});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: seed_corpus DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  for (const char* sub : {"wire", "frames"}) fs::remove_all(dir / sub);  // what earlier fuzzer runs added
  fs::create_directories(dir / "wire");
  fs::create_directories(dir / "frames");
  each_kind<wire::body>([&](const wire::body& b, std::size_t i) {
    write(dir / "wire" / ("body-" + std::to_string(i)), wire::encode(wire::envelope{wire::protocol_version, "node-a", 1, b}));
  });
  each_kind<wire::device_op>([&](const wire::device_op& op, std::size_t i) {
    for (std::size_t n = 0; n < 3; ++n) {
      wire::device_call c;
      c.id = 7;
      c.device = 1;
      c.op = op;
      std::vector<std::uint32_t> frames;
      for (std::size_t t = 0; t < n; ++t) {
        c.tensors.push_back({static_cast<std::uint8_t>(t), {2, 3}});  // float32, then float64
        frames.push_back(t == 0 ? 24 : 48);
      }
      const auto header = wire::encode(wire::envelope{wire::protocol_version, "node-a", 1, c});
      const auto name = "op-" + std::to_string(i) + "-" + std::to_string(n);
      if (n == 0) write(dir / "wire" / name, header);
      write(dir / "frames" / name, fuzz::join(header, frames));
    }
  });
  std::printf("%d seeds in %s\n", written, dir.c_str());
  return 0;
}
