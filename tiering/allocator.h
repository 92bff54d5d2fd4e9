// tiering/allocator.h - the process allocator: its tuning and what it says about memory in use.
//
// Release builds link jemalloc as the process allocator, as Redis does (small objects pack
// tightly, freed pages are reused instead of returned and faulted in again); sanitizer builds
// keep the sanitizer's allocator. These figures back INFO memory and the maxmemory check.
//
// jemalloc is tuned in allocator.cc (its `malloc_conf`): large values (1-80 MiB KV-cache chunks)
// stay in the normal arenas instead of jemalloc's "oversize" arena, which purges on every free,
// so a 32 MiB SET reuses pages a previous value left instead of faulting in and zeroing 8192 new
// ones; and purging runs on jemalloc's background thread, off the connection threads.
#pragma once

#include <cstddef>

namespace tiering {

/// Bytes allocated by the application (jemalloc stats.allocated, or glibc's mallinfo2). Costs
/// a few microseconds: call from a cron, not per request. Thread-safe.
size_t allocator_allocated();
/// The process allocator's figures in bytes: allocated (as allocator_allocated()), active
/// (pages holding allocations) and resident (pages it keeps resident). Without jemalloc,
/// active and resident are the allocated figure. Same cost as allocator_allocated().
struct AllocatorStats {
  size_t allocated = 0, active = 0, resident = 0;
};
AllocatorStats allocator_stats();
/// Resident set size of the process in bytes (/proc/self/statm). Thread-safe.
size_t process_rss();
/// "jemalloc-5.3.0" or "libc", as INFO's mem_allocator.
const char* allocator_name();

/// A jemalloc arena of its own for a subsystem's threads, so that its heap can be measured
/// apart (the SSD tier: RocksDB's memtables and write batches, read buffers). 0 when jemalloc
/// is not the process allocator (sanitizer builds): then nothing can be measured apart.
unsigned allocator_create_arena();
/// Makes the calling thread allocate from `arena` (no-op for 0).
void allocator_use_arena(unsigned arena);
/// Bytes allocated in `arena` as of the last allocator_allocated() call (its epoch).
size_t allocator_arena_allocated(unsigned arena);

}  // namespace tiering
