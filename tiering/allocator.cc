#include "tiering/allocator.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>

#ifdef STRATAKV_JEMALLOC
#include <jemalloc/jemalloc.h>
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRATAKV_SANITIZER_ALLOCATOR
// From the sanitizer runtime's allocator interface (sanitizer/allocator_interface.h, which
// g++'s packages do not ship).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

#ifdef STRATAKV_JEMALLOC
// Read by jemalloc at its initialisation (jemalloc(3), "TUNING"). See allocator.h for why.
extern "C" {
const char* malloc_conf = "oversize_threshold:0,background_thread:true";
}
#endif

namespace tiering {

size_t allocator_allocated() {
#ifdef STRATAKV_JEMALLOC
  uint64_t epoch = 1;
  size_t sz = sizeof(epoch);
  mallctl("epoch", &epoch, &sz, &epoch, sz);  // refresh jemalloc's cached statistics
  size_t allocated = 0;
  sz = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &sz, nullptr, 0) == 0) return allocated;
  return 0;
#elif defined(STRATAKV_SANITIZER_ALLOCATOR)
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#endif
}

AllocatorStats allocator_stats() {
  AllocatorStats s;
  s.allocated = allocator_allocated();  // refreshes jemalloc's epoch
#ifdef STRATAKV_JEMALLOC
  size_t v = 0, sz = sizeof(v);
  s.active = mallctl("stats.active", &v, &sz, nullptr, 0) == 0 ? v : s.allocated;
  sz = sizeof(v);
  s.resident = mallctl("stats.resident", &v, &sz, nullptr, 0) == 0 ? v : s.active;
#else
  s.active = s.resident = s.allocated;
#endif
  return s;
}

size_t process_rss() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

unsigned allocator_create_arena() {
#ifdef STRATAKV_JEMALLOC
  unsigned arena = 0;
  size_t sz = sizeof(arena);
  if (mallctl("arenas.create", &arena, &sz, nullptr, 0) == 0) return arena;
#endif
  return 0;
}

void allocator_use_arena(unsigned arena) {
#ifdef STRATAKV_JEMALLOC
  if (arena != 0) mallctl("thread.arena", nullptr, nullptr, &arena, sizeof(arena));
#else
  (void)arena;
#endif
}

size_t allocator_arena_allocated(unsigned arena) {
#ifdef STRATAKV_JEMALLOC
  if (arena == 0) return 0;
  size_t total = 0;
  for (const char* kind : {"small", "large"}) {
    char name[64];
    std::snprintf(name, sizeof name, "stats.arenas.%u.%s.allocated", arena, kind);
    size_t v = 0, sz = sizeof(v);
    if (mallctl(name, &v, &sz, nullptr, 0) == 0) total += v;
  }
  return total;
#else
  (void)arena;
  return 0;
#endif
}

const char* allocator_name() {
#ifdef STRATAKV_JEMALLOC
  static char name[64] = "";
  if (name[0] == '\0') {
    const char* version = nullptr;
    size_t sz = sizeof(version);
    if (mallctl("version", &version, &sz, nullptr, 0) == 0 && version != nullptr) {
      // "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c" -> "jemalloc-5.3.0"
      int len = 0;
      while (version[len] != '\0' && version[len] != '-') ++len;
      std::snprintf(name, sizeof name, "jemalloc-%.*s", len, version);
    } else {
      std::snprintf(name, sizeof name, "jemalloc");
    }
  }
  return name;
#else
  return "libc";
#endif
}

}  // namespace tiering
