// The user's data files: NumPy's .npy arrays and flat token files (nanoGPT's train.bin),
// mapped for the one pass that checks them, then read sample by sample with pread: nothing
// holds a whole file in memory, and a sample's read does not map its neighbours (the kernel's
// fault-around would count 64 KiB of them in the process's resident set for each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::data {

// A read-only mapping of a whole file; unmapped when the last owner goes.
class mapped_file {
 public:
  static result<std::shared_ptr<const mapped_file>> open(const std::string& path);
  ~mapped_file();
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  const std::uint8_t* bytes() const { return bytes_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the kernel that [offset, offset + n) is not needed soon, so that a pass over the
  // whole file (checks, the fingerprint) does not stay resident in this process.
  void release(std::size_t offset, std::size_t n) const;
  // Copies [offset, offset + n) out of the file (not the mapping); false on a read error or a
  // file that shrank since it was opened.
  bool read(std::size_t offset, std::size_t n, void* out) const;

 private:
  mapped_file(std::string path, int fd, const std::uint8_t* bytes, std::size_t size) : path_(std::move(path)), fd_(fd), bytes_(bytes), size_(size) {}
  std::string path_;
  int fd_ = -1;
  const std::uint8_t* bytes_ = nullptr;
  std::size_t size_ = 0;
};

// Copies [offset, offset + n) of the file at `path` with one pread (no stream's read-ahead
// buffer: a tar member of 600 bytes reads 600 bytes); false if it cannot.
bool read_at(const std::string& path, std::size_t offset, std::size_t n, void* out);

// The element types a data file may hold, little-endian.
enum class dtype { u8, i8, u16, i16, u32, i32, i64, f32, f64 };
std::size_t item_bytes(dtype t);
const char* dtype_name(dtype t);  // NumPy's: uint8, ..., float64
result<dtype> parse_dtype(const std::string& name);  // uint16, uint32, ... (job files)
bool is_float(dtype t);
// Element i of an array of `t` at `p`, as a double (every integer type here fits exactly but
// int64 beyond 2^53, which labels and token ids never reach).
double element(dtype t, const std::uint8_t* p, std::size_t i);

// A C-ordered .npy array (format versions 1-3) over its mapping.
struct npy_array {
  std::shared_ptr<const mapped_file> file;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  std::size_t data_offset = 0;  // where the elements start in the file
  std::int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  std::size_t row_elements() const;  // the product of the shape past the first axis
  const std::uint8_t* row(std::int64_t i) const { return file->bytes() + data_offset + static_cast<std::size_t>(i) * row_elements() * item_bytes(type); }
};

// Errors name the file and what is wrong: not .npy, Fortran order, big-endian or an
// unsupported dtype, a size that does not match the header (truncated or trailing bytes).
result<npy_array> open_npy(const std::string& path);

}  // namespace dynapar::data
