// tiering/thread_cache.h - explicit jemalloc thread caches for the memory region's arena.
//
// jemalloc's implicit thread cache cannot serve the region (region.h): a region block freed
// into it would be handed out later by the process's plain malloc(). So region calls used to
// pass MALLOCX_TCACHE_NONE, and every small allocation and free took the arena's bin lock:
// about 1,000 instructions per 100-byte SET (bench/RESULTS.md, issue 17, "the small-op path").
// Instead each thread gets, per region, an explicit cache (mallctl "tcache.create") that only
// region calls name (MALLOCX_TCACHE(i)), so it only ever holds that region's blocks.
//
// Only threads that ask for it get caches (enable_thread_caches(): the server's I/O threads,
// where small SETs and GETs run); the others (eviction, lazy free, the SSD tier's, tests) keep
// MALLOCX_TCACHE_NONE, so what they free is back in the arena at once and the figures exact.
//
// Lifetime: a thread's caches are destroyed (flushed back to their arenas) when it exits; a
// region destroys every thread's cache of it before its arena goes (destroy_thread_caches).
// A registry (index -> owning region) under a mutex keeps the two from destroying one index
// twice; region ids are never reused, so a stale thread-local entry never matches again.
// Blocks held in caches count as allocated in jemalloc's statistics (used_memory): at most
// a bin's cache per size class and I/O thread, a few hundred KiB per thread when full.
#pragma once

#include <cstdint>

namespace tiering {

/// The calling thread's last used cache: (owner region id, tcache index or -1 for none).
struct ThreadCacheSlot {
  uint64_t owner = 0;
  int tcache = -1;
};
extern constinit thread_local ThreadCacheSlot t_region_cache;

/// From now on the calling thread allocates and frees region blocks through caches of its own.
/// Call at the start of a thread that serves small requests. Not undone.
void enable_thread_caches();

/// Creates or finds the calling thread's cache for region `owner` (> 0); -1 when jemalloc
/// gives none or the thread did not enable_thread_caches() (callers then pass
/// MALLOCX_TCACHE_NONE). Thread-safe.
int thread_cache_slow(uint64_t owner);

/// The calling thread's cache for region `owner`: one thread-local compare when it is the
/// region the thread used last. Thread-safe.
inline int thread_cache(uint64_t owner) {
  if (t_region_cache.owner == owner) [[likely]] return t_region_cache.tcache;
  return thread_cache_slow(owner);
}

/// Returns the blocks of the calling thread's cache for `owner` to the arena (so that freed
/// slabs can go back to the region: before a retry of a failed allocation). Thread-safe.
void flush_thread_cache(uint64_t owner);

/// Destroys every thread's cache for `owner`, their blocks back to its arena. Call before the
/// arena is destroyed, once no thread allocates from or frees to that region. Thread-safe.
void destroy_thread_caches(uint64_t owner);

}  // namespace tiering
