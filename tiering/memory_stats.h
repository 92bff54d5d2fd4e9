// tiering/memory_stats.h - what the process's allocator says about memory in use.
//
// Release builds link jemalloc as the process allocator, as Redis does (small objects pack
// tightly, freed pages are reused instead of returned and faulted in again); sanitizer builds

#pragma once

#include <cstddef>

namespace tiering {

/// Bytes allocated by the application (jemalloc stats.allocated, or glibc's mallinfo2). Costs
/// a few microseconds: call from a cron, not per request. Thread-safe.
size_t allocator_allocated();
/// Resident set size of the process in bytes (/proc/self/statm). Thread-safe.
size_t process_rss();
/// "jemalloc-5.3.0" or "libc", as INFO's mem_allocator.
const char* allocator_name();

}  // namespace tiering
