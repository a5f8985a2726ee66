#include "data/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace dynapar::data {

result<std::shared_ptr<const mapped_file>> mapped_file::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("io", path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("io", path + ": not a regular file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* p = nullptr;
  if (size > 0) {
    p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return make_error("io", path + ": cannot map it: " + std::strerror(e));
    }
  }
  // The checking pass reads it in order.
  if (p) ::madvise(p, size, MADV_SEQUENTIAL);
  return std::shared_ptr<const mapped_file>(new mapped_file(path, fd, static_cast<const std::uint8_t*>(p), size));
}

mapped_file::~mapped_file() {
  if (bytes_) ::munmap(const_cast<std::uint8_t*>(bytes_), size_);
  ::close(fd_);
}

namespace {

bool pread_all(int fd, std::size_t offset, std::size_t n, void* out) {
  auto* to = static_cast<char*>(out);
  while (n > 0) {
    const auto got = ::pread(fd, to, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    to += got, offset += static_cast<std::size_t>(got), n -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

bool mapped_file::read(std::size_t offset, std::size_t n, void* out) const { return pread_all(fd_, offset, n, out); }

bool read_at(const std::string& path, std::size_t offset, std::size_t n, void* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = pread_all(fd, offset, n, out);
  ::close(fd);
  return ok;
}

void mapped_file::release(std::size_t offset, std::size_t n) const {
  if (!bytes_ || offset >= size_) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t lo = offset / page * page, hi = std::min(size_, offset + n);
  ::madvise(const_cast<std::uint8_t*>(bytes_) + lo, hi - lo, MADV_DONTNEED);
}

std::size_t item_bytes(dtype t) {
  switch (t) {
    case dtype::u8:
    case dtype::i8: return 1;
    case dtype::u16:
    case dtype::i16: return 2;
    case dtype::u32:
    case dtype::i32:
    case dtype::f32: return 4;
    case dtype::i64:
    case dtype::f64: return 8;
  }
  return 1;
}

const char* dtype_name(dtype t) {
  switch (t) {
    case dtype::u8: return "uint8";
    case dtype::i8: return "int8";
    case dtype::u16: return "uint16";
    case dtype::i16: return "int16";
    case dtype::u32: return "uint32";
    case dtype::i32: return "int32";
    case dtype::i64: return "int64";
    case dtype::f32: return "float32";
    case dtype::f64: return "float64";
  }
  return "?";
}

result<dtype> parse_dtype(const std::string& name) {
  for (auto t : {dtype::u8, dtype::i8, dtype::u16, dtype::i16, dtype::u32, dtype::i32, dtype::i64, dtype::f32, dtype::f64})
    if (name == dtype_name(t)) return t;
  return make_error("bad_data", "unknown dtype '" + name + "' (uint8, int8, uint16, int16, uint32, int32, int64, float32, float64)");
}

bool is_float(dtype t) { return t == dtype::f32 || t == dtype::f64; }

double element(dtype t, const std::uint8_t* p, std::size_t i) {
  auto get = [&](auto v) {
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));  // the mapping need not be aligned for it
    return static_cast<double>(v);
  };
  switch (t) {
    case dtype::u8: return p[i];
    case dtype::i8: return get(std::int8_t{});
    case dtype::u16: return get(std::uint16_t{});
    case dtype::i16: return get(std::int16_t{});
    case dtype::u32: return get(std::uint32_t{});
    case dtype::i32: return get(std::int32_t{});
    case dtype::i64: return get(std::int64_t{});
    case dtype::f32: return get(float{});
    case dtype::f64: return get(double{});
  }
  return 0;
}

std::size_t npy_array::row_elements() const {
  std::size_t n = 1;
  for (std::size_t k = 1; k < shape.size(); ++k) n *= static_cast<std::size_t>(shape[k]);
  return n;
}

namespace {

// The value after 'key': in the header's Python dict literal, up to the next top-level
// comma; "" when the key is missing.
std::string dict_value(const std::string& header, const std::string& key) {
  const auto at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  auto colon = header.find(':', at);
  if (colon == std::string::npos) return "";
  std::size_t i = colon + 1, depth = 0;
  std::string out;
  for (; i < header.size(); ++i) {
    const char c = header[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' && depth == 0) || c == '}') break;
    out += c;
  }
  const auto b = out.find_first_not_of(" \t"), e = out.find_last_not_of(" \t");
  return b == std::string::npos ? "" : out.substr(b, e - b + 1);
}

result<dtype> npy_dtype(const std::string& descr) {
  // '<f4', '|u1', ...: '<' little-endian, '|' no order (one byte), '=' this machine's.
  if (descr.size() < 5 || descr.front() != '\'' || descr.back() != '\'') return make_error("bad_data", "descr " + descr + " is not a simple type");
  const std::string d = descr.substr(1, descr.size() - 2);
  if (d[0] == '>' && d != ">u1" && d != ">i1") return make_error("bad_data", "big-endian elements (" + d + ") are not read; save little-endian");
  const std::string code = d.substr(1);
  const struct {
    const char* code;
    dtype t;
  } known[] = {{"u1", dtype::u8},  {"i1", dtype::i8},  {"u2", dtype::u16}, {"i2", dtype::i16}, {"u4", dtype::u32},
               {"i4", dtype::i32}, {"i8", dtype::i64}, {"f4", dtype::f32}, {"f8", dtype::f64}};
  for (const auto& k : known)
    if (code == k.code) return k.t;
  return make_error("bad_data", "dtype " + d + " is not read (uint8..int64, float32, float64)");
}

}  // namespace

result<npy_array> open_npy(const std::string& path) {
  auto file = mapped_file::open(path);
  if (!file) return file.err();
  const auto* b = (*file)->bytes();
  const std::size_t size = (*file)->size();
  auto bad = [&](const std::string& what) { return make_error("bad_data", path + ": " + what); };
  if (size < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0) return bad("not a .npy file (no \\x93NUMPY magic)");
  const int major = b[6];
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = b[8] | (std::size_t(b[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return bad("its header ends early");
    header_len = b[8] | (std::size_t(b[9]) << 8) | (std::size_t(b[10]) << 16) | (std::size_t(b[11]) << 24);
    start = 12;
  } else {
    return bad(".npy format version " + std::to_string(major) + " is not read (1, 2 or 3)");
  }
  if (start + header_len > size) return bad("its header ends early");
  const std::string header(reinterpret_cast<const char*>(b + start), header_len);
  npy_array a;
  a.file = *file;
  a.data_offset = start + header_len;
  auto t = npy_dtype(dict_value(header, "descr"));
  if (!t) return bad(t.err().message);
  a.type = *t;
  if (dict_value(header, "fortran_order") != "False") return bad("Fortran-ordered arrays are not read; save with np.ascontiguousarray");
  const std::string shape = dict_value(header, "shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') return bad("its header has no shape");
  std::size_t elements = 1;
  for (std::size_t i = 1; i + 1 < shape.size();) {
    while (i + 1 < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i + 1 >= shape.size()) break;
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(shape.substr(i), &used);
    } catch (...) {
      return bad("its shape " + shape + " is not integers");
    }
    if (v < 0 || v > (1ll << 40)) return bad("its shape " + shape + " is out of range");
    a.shape.push_back(v);
    if (v > 0 && elements > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(v)) return bad("its shape " + shape + " is too large");
    elements *= static_cast<std::size_t>(v);
    i += used;
  }
  const std::size_t want = a.data_offset + elements * item_bytes(a.type);
  if (size < want) return bad("truncated: the header's shape " + shape + " of " + dtype_name(a.type) + " needs " + std::to_string(want) + " bytes, the file has " + std::to_string(size));
  if (size > want) return bad(std::to_string(size - want) + " bytes after the array the header describes");
  return a;
}

}  // namespace dynapar::data
