// The allocator policy, checked against glibc's own accounting (mallinfo2) of where freed
// memory went: kept in the heap, or given back.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/allocator.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace dynapar;

TEST_CASE("DYNAPAR_MALLOC_KEEP_MB: defaults, a size, 0, and bad values named") {
  auto d = allocator_options_from_env(nullptr);
  REQUIRE(d);
  CHECK(d->keep_bytes == allocator_options{}.keep_bytes);
  CHECK(allocator_options_from_env("")->keep_bytes == allocator_options{}.keep_bytes);
  auto small = allocator_options_from_env("8");
  REQUIRE(small);
  CHECK(small->keep_bytes == 8u << 20);
  CHECK(small->mapped_from_bytes == 8u << 20);  // never above what is kept
  CHECK(allocator_options_from_env("0")->keep_bytes == 0);
  for (const char* bad : {"-1", "1025", "12x", "1e3", "99999999999"}) {
    auto r = allocator_options_from_env(bad);
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("DYNAPAR_MALLOC_KEEP_MB") != std::string::npos);
    CHECK(r.err().message.find(bad) != std::string::npos);
  }
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
namespace {
// Written page by page, so that the pages are really taken.
int touch(void* p, std::size_t n) {
  std::memset(p, 1, n);
  return static_cast<volatile char*>(p)[n - 1];
}
}  // namespace

TEST_CASE("Freed memory below the bound stays in the heap") {
  allocator_options o;
  o.keep_bytes = 128u << 20;
  o.mapped_from_bytes = 32u << 20;
  REQUIRE(keep_freed_memory(o));
  const std::size_t kept = 24u << 20;
  const auto before = mallinfo2();
  void* a = std::malloc(kept);
  REQUIRE(a);
  CHECK(touch(a, kept) == 1);
  const auto in_use = mallinfo2();
  CHECK(in_use.hblkhd == before.hblkhd);  // from the heap, not mapped apart
  std::free(a);
  // The heap did not shrink: the freed bytes are its free bytes, not given back.
  const auto after = mallinfo2();
  CHECK(after.arena == in_use.arena);
  CHECK(after.fordblks >= kept);
}

TEST_CASE("A thread's arena maps a large block apart, and keeps a heap it emptied") {
  REQUIRE(keep_freed_memory(allocator_options{}));
  // Three 24 MiB blocks do not fit in one 64 MiB heap of a thread's arena: the third takes a
  // second heap. Under glibc's own policy (or the thresholds alone) freeing them deletes it.
  // First, a block larger than a heap (64 MiB) and than the mapping size is mapped apart and
  // given back when freed.
  std::size_t mapped_in_use = 0, mapped_after = 0, in_use = 0, after = 0;
  const std::size_t mapped_before = mallinfo2().hblkhd;
  std::thread([&] {
    const std::size_t big = 80u << 20, n = 24u << 20;
    void* b = std::malloc(big);
    if (b) touch(b, big);
    mapped_in_use = mallinfo2().hblkhd;
    std::free(b);
    mapped_after = mallinfo2().hblkhd;
    std::vector<void*> blocks;
    for (int i = 0; i < 3; ++i) {
      blocks.push_back(std::malloc(n));
      if (blocks.back()) touch(blocks.back(), n);
    }
    in_use = mallinfo2().arena;
    for (void* p : blocks) std::free(p);
    after = mallinfo2().arena;
  }).join();
  CHECK(mapped_in_use >= mapped_before + (80u << 20));
  CHECK(mapped_after == mapped_before);
  CHECK(in_use >= 72u << 20);
  CHECK(after == in_use);
}
#endif
