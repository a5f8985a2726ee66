#include "common/allocator.hpp"

#include <algorithm>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace dynapar {

result<allocator_options> allocator_options_from_env(const char* value) {
  allocator_options o;
  if (!value || !*value) return o;
  const std::string s = value;
  const bool digits = s.size() <= 4 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long mb = digits ? std::stol(s) : -1;
  if (mb < 0 || mb > 1024)
    return make_error("bad_env", "DYNAPAR_MALLOC_KEEP_MB must be a whole number of MiB from 0 to 1024, got '" + s + "'");
  o.keep_bytes = static_cast<std::size_t>(mb) << 20;
  o.mapped_from_bytes = std::min(o.mapped_from_bytes, o.keep_bytes);
  return o;
}

status keep_freed_memory(const allocator_options& o) {
  if (o.keep_bytes == 0) return ok_status();
#if defined(__GLIBC__)
  // Setting either turns off glibc's sliding thresholds, so both are set.
  const std::size_t mapped = std::min(o.mapped_from_bytes, o.keep_bytes);
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(mapped)) != 1)
    return make_error("bad_allocator", "glibc refused a mapping threshold of " + std::to_string(mapped) + " bytes");
  if (mallopt(M_TRIM_THRESHOLD, static_cast<int>(o.keep_bytes)) != 1)
    return make_error("bad_allocator", "glibc refused a trim threshold of " + std::to_string(o.keep_bytes) + " bytes");
  // A thread's arena grows by heaps of 64 MiB, and glibc deletes a heap that becomes empty
  // whatever the trim threshold says, unless the free space left behind would be under the
  // top pad. A device thread whose step needs more than one heap (ResNet-18's 19 MB layers,
  // Adam's temporaries) took a fresh heap and its faults every step: a pad of a heap's size
  // keeps them (docs/BENCHMARKS.md, "The allocator").
  const std::size_t pad = std::min(o.keep_bytes, std::size_t{64} << 20);
  if (mallopt(M_TOP_PAD, static_cast<int>(pad)) != 1)
    return make_error("bad_allocator", "glibc refused a top pad of " + std::to_string(pad) + " bytes");
#endif
  return ok_status();
}

}  // namespace dynapar
