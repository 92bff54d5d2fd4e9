// tiering/memory_tier.h - the process's memory tier: the one region every value lives in.
//
// DESIGN.md, "The memory tier": one MemoryRegion (region.h) of `memory.capacity` bytes holds
// every value's bytes (value.h), so rdma/ registers it once and addresses any value by offset.
//
// Why process-wide state: a ValueRef is a single pointer, and the last reference may drop on
// any thread (a worker finishing a socket write, the async FLUSHALL thread), which must then
// give the block back to the region it came from. Storing the region in every value would cost
// 8 bytes a value; a process has one region, so it is found here. The server creates it at
// start-up (start()); code that never does (unit tests of the keyspace) gets a default region on
// first use. The region is never destroyed while the process runs: detached threads may still
// release values during exit.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tiering/region.h"

namespace tiering {

/// Memory figures in bytes, for INFO, MEMORY STATS and the maxmemory check.
struct MemoryFigures {
  RegionStats region;  ///< the region's own figures (region.allocated(): value blocks)
  size_t heap = 0;     ///< the process allocator's bytes outside the region: keys, tables,
                       ///< client buffers, everything that is not a value block
  /// All memory the server allocated (Redis's used_memory): heap + value blocks.
  size_t used() const { return heap + region.allocated(); }
};

class MemoryTier {
 public:
  /// Creates the process's region. Call once at start-up, before any value is allocated.
  /// False with the reason in `*error` when the region cannot be reserved. Not thread-safe.
  static bool start(const RegionOptions& options, std::string* error);

  /// The region values are allocated in and freed to. On first use without start(), creates
  /// a default one (RegionOptions{}: 1 GiB reserved, backed lazily). Thread-safe.
  static MemoryRegion& region() {
    MemoryRegion* r = current_.load(std::memory_order_acquire);
    return r != nullptr ? *r : create_default();
  }

  /// Installs `region` as the process's region and returns the previous one (null if none).
  /// For tests: no value of the previous region may be alive. Not thread-safe.
  static std::unique_ptr<MemoryRegion> exchange(std::unique_ptr<MemoryRegion> region);

  /// Current figures. Refreshes jemalloc's statistics: costs a few microseconds, so call it
  /// from a cron or INFO, not per request. Thread-safe.
  static MemoryFigures figures();

 private:
  static MemoryRegion& create_default();
  static std::atomic<MemoryRegion*> current_;
};

}  // namespace tiering
