// How the C allocator treats memory a training process frees. glibc's default hands a heap's
// free top back to the system once 128 KiB lie there (more after its first large frees), so
// a step that frees and allocates again the same megabytes of tensors takes fresh pages and
// their faults every time: 9-16 % of the step of the CNN over 3 node processes on 2 cores
// (docs/BENCHMARKS.md, "The allocator"). A process that keeps what it freed, up to a bound,
// reuses warm pages instead. Process-wide by nature (mallopt), so set once in main().
#pragma once

#include <cstddef>

#include "common/result.hpp"

namespace dynapar {

struct allocator_options {
  // Free bytes a heap keeps before it gives memory back; 0 leaves glibc's own policy. Each
  // heap also keeps a free top of min(keep_bytes, 64 MiB) (glibc's top pad), so that a
  // thread's emptied heap is not deleted.
  std::size_t keep_bytes = std::size_t{256} << 20;
  // Blocks from this size are mapped on their own and unmapped when freed, where no heap has
  // room for them (glibc's largest threshold is 32 MiB; a smaller keep_bytes lowers it to
  // that).
  std::size_t mapped_from_bytes = std::size_t{32} << 20;
};

// The options DYNAPAR_MALLOC_KEEP_MB asks for: unset or empty, the defaults; else a whole
// number of MiB from 0 to 1024 (0: glibc's own policy). Anything else is an error naming it.
result<allocator_options> allocator_options_from_env(const char* value);

// Applies the options to this process's allocator (glibc; elsewhere a no-op). An error when
// glibc refuses a setting.
status keep_freed_memory(const allocator_options& o);

}  // namespace dynapar
