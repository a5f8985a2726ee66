#include "data/idx.hpp"

#include <zlib.h>

#include <memory>

namespace dynapar::data {

result<idx_file> read_idx_gz(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (!f) return make_error("io", "cannot open '" + path + "'");
  auto read_exact = [&](void* buf, unsigned n) { return gzread(f.get(), buf, n) == static_cast<int>(n); };
  unsigned char magic[4];
  if (!read_exact(magic, 4)) return make_error("bad_data", path + ": shorter than an idx header");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08)
    return make_error("bad_data", path + ": not an idx file of unsigned bytes (magic " + std::to_string(magic[2]) + ")");
  const int ndims = magic[3];
  if (ndims < 1 || ndims > 4) return make_error("bad_data", path + ": " + std::to_string(ndims) + " dimensions");
  idx_file out;
  std::uint64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    unsigned char b[4];
    if (!read_exact(b, 4)) return make_error("bad_data", path + ": header ends early");
    const std::uint32_t v = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
    out.dims.push_back(v);
    total *= v;
  }
  if (total > (1ull << 32)) return make_error("bad_data", path + ": implausibly large");
  out.values.resize(total);
  std::uint64_t done = 0;
  while (done < total) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::uint64_t>(total - done, 1u << 24));
    if (!read_exact(out.values.data() + done, chunk)) return make_error("bad_data", path + ": data ends early (truncated?)");
    done += chunk;
  }
  return out;
}

}  // namespace dynapar::data
