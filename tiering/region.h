// tiering/region.h - the memory region: the one contiguous range where value bytes live.
//
// DESIGN.md, "The memory tier": one range of `capacity` bytes, reserved with mmap (MAP_NORESERVE,
// backed lazily, 2 MiB-aligned), so any value is (offset, length) inside it and the range can be
// registered with an RDMA NIC once. Allocations take one of two paths, both inside the region:
//   - small sizes (up to jemalloc's largest small size class, 14 KiB): a dedicated jemalloc
//     arena whose extent hooks take extents only from the region. jemalloc packs them in slabs.
//   - larger sizes: a page-rounded block straight from the region's ExtentAllocator
//     (extent_allocator.h). jemalloc would round them up to its large size classes, four per
//     doubling (32 MiB + 16 bytes takes 40 MiB), which caps utilisation at 80% for some sizes;
//     page rounding wastes at most one page. Freed blocks stay resident for warm reuse (by
//     default without bound: the first touch of a page costs more than a copy into it), and
//     are purged with madvise(MADV_DONTNEED) when trim() or purge() asks (resident_policy.h).
// Both paths share the region's free space: the hooks' dalloc returns extents to the
// ExtentAllocator (it returns false, "deallocated", instead of letting jemalloc retain them), so
// space freed by small values serves large ones and the other way round. Those extents arrive
// as dirty pages too: they coalesce first and are purged in large ranges, not slab by slab.
// So freed bytes stay resident (up to `dirty_max` if set); purge() returns everything at once.
//
// jemalloc tuning for the arena (see region.cc): its metadata stays outside the region
// (experimental.arenas_create_ext, metadata_use_hooks=false); retain_grow_limit is one page, so
// jemalloc asks the hooks for what it needs instead of geometrically growing chunks it would
// keep; muzzy decay is off (freed slabs go dirty -> hooks' dalloc, no MADV_FREE limbo); split and
// merge hooks succeed, so extents are reused at any size. jemalloc does not give up its cached
// slabs to satisfy another size class, so a failed allocation purges the arena and retries
// once. No call uses jemalloc's implicit thread cache, which would hand a freed region block to
// the process's plain malloc(): small ones go through an explicit cache per thread that holds
// this region's blocks only (thread_cache.h), so most take no arena lock.
//
// Sanitizer builds use the same code: jemalloc is linked for mallocx/mallctl while the
// sanitizer's allocator stays the process malloc. Under ASan, freed blocks are poisoned, and
// only the requested bytes of a block are unpoisoned until usable_size() is called.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tiering/extent_allocator.h"

namespace tiering {

/// How the region is backed.
enum class HugePages {
  kOff,          ///< normal 4 KiB pages
  kTransparent,  ///< madvise(MADV_HUGEPAGE): transparent huge pages where the kernel can
  kHugetlb,      ///< MAP_HUGETLB: 2 MiB pages reserved from the hugetlb pool at creation
};

struct RegionOptions {
  /// Bytes of the region; rounded up to 2 MiB.
  size_t capacity = size_t{1} << 30;
  /// Back the region with huge pages: MAP_HUGETLB (reserved up front, so a fault can never
  /// SIGBUS) when the hugetlb pool has room, else transparent huge pages, else normal pages.
  /// MemoryRegion::hugepages() and note() tell what was obtained.
  bool hugepages = false;
  /// Return freed pages to the OS (madvise). Turn off when the region is pinned by a NIC
  /// without on-demand paging: MADV_DONTNEED would detach the process's pages from the NIC's.
  /// Always off with MAP_HUGETLB (pages are reserved anyway).
  bool purge = true;
  /// Freed bytes kept resident for warm reuse before purging on release; -1: no bound (the
  /// server purges from its cron by ResidentPolicy, or on MEMORY PURGE).
  int64_t dirty_max = -1;
  /// Touch this many bytes of the region at creation (memory.prefault), so the first values
  /// take no page faults; they are kept as dirty (resident) free pages. Clamped to capacity.
  size_t prefault = 0;
  /// The arena's dirty_decay_ms: how long jemalloc keeps freed slabs before handing them back
  /// to the region (-1: never by time, 0: at once).
  ssize_t dirty_decay_ms = 1000;
};

/// Region figures in bytes. `allocated()` is what value bytes take; `used()` what is not free.
struct RegionStats {
  size_t capacity = 0;          ///< size of the region
  size_t arena_extents = 0;     ///< region bytes held by the jemalloc arena (its extents)
  size_t arena_active = 0;      ///< stats.arenas.<i>.pactive * page: pages in active extents
  size_t arena_allocated = 0;   ///< stats.arenas.<i>.{small,large}.allocated
  size_t direct_allocated = 0;  ///< page-rounded blocks of sizes above the small classes
  size_t dirty = 0;             ///< free bytes still resident (kept for warm reuse)
  size_t free = 0;              ///< free bytes outside the arena, dirty included
  size_t free_ranges = 0;       ///< number of free ranges (fragmentation)
  size_t largest_free = 0;      ///< largest free range
  size_t allocated() const { return arena_allocated + direct_allocated; }
  size_t used() const { return arena_extents + direct_allocated; }
};

/// One region and its allocator. Thread-safe: every method may be called from any thread.
class MemoryRegion {
 public:
  /// Reserves the region and creates its arena. Null on failure, with the reason in `*error`.
  static std::unique_ptr<MemoryRegion> create(const RegionOptions& options,
                                              std::string* error = nullptr);
  /// Destroys the arena (discarding allocations still live) and unmaps the region.
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  char* base() const { return base_; }
  /// Bytes of the region.
  size_t size() const { return size_; }
  /// What backs the region; note() says why huge pages were not obtained ("" if they were or
  /// were not asked for). The caller logs it.
  HugePages hugepages() const { return hugepages_; }
  const std::string& note() const { return note_; }
  /// The jemalloc arena index (for mallctl "arena.<i>.*").
  unsigned arena() const { return arena_; }

  /// Whether [p, p+n) lies inside the region.
  bool contains(const void* p, size_t n) const {
    const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
    return a >= b && n <= size_ && a - b <= size_ - n;
  }
  /// Offset of `p` (inside the region) from base().
  size_t offset_of(const void* p) const {
    return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base_);
  }

  /// `size` bytes inside the region, 16-aligned (page-aligned above the small classes). Null when
  /// the region cannot fit them (a signal to evict): never memory from elsewhere, never aborts.
  void* allocate(size_t size);
  /// Frees a block of allocate(); null is ignored.
  void free(void* p);
  /// Bytes usable at `p`, a live block (>= the requested size). Under ASan, also makes them
  /// addressable.
  size_t usable_size(void* p);

  /// Returns every free page to the OS now: the large-value cache and the arena's dirty slabs
  /// (mallctl "arena.<i>.purge"). Costs a few milliseconds for a large region: not per request.
  void purge();
  /// Returns free resident pages to the OS until at most `keep` bytes of them remain; madvise
  /// runs outside the allocator's lock, so allocations proceed meanwhile. Thread-safe.
  void trim(size_t keep);
  /// Bytes the last prefault touched, and how long it took (milliseconds).
  size_t prefaulted() const { return prefaulted_; }
  int64_t prefault_ms() const { return prefault_ms_; }
  /// Current figures; refreshes jemalloc's statistics (mallctl "epoch"): call from a cron.
  RegionStats stats() const;
  /// Whether allocate(size) would find room in one piece now. For a size above small_max(),
  /// the largest free range; when that is too small, the arena's freed slabs are handed back
  /// to the region first (they coalesce with their neighbours) and it is looked at again.
  /// Smaller sizes: true (the arena packs them; freed bytes are what counts). Costs
  /// microseconds: for the eviction of a failed allocation, not per request. Thread-safe.
  bool fits(size_t size);
  /// Largest size served by the jemalloc arena; larger ones are page-rounded blocks.
  size_t small_max() const { return small_max_; }
  /// Bytes of the page-rounded blocks live now (RegionStats::direct_allocated): exact and
  /// cheap (one atomic load), unlike stats(). Thread-safe.
  size_t direct_allocated() const { return direct_allocated_.load(std::memory_order_relaxed); }

 private:
  MemoryRegion() = default;
  bool init(const RegionOptions& options, std::string* error);
  bool map(const RegionOptions& options, std::string* error);
  bool create_arena(std::string* error);
  /// Touches `bytes` of free pages (MADV_POPULATE_WRITE, else one write per page) and keeps
  /// them as dirty free pages.
  void prefault(size_t bytes);
  /// madvise(MADV_DONTNEED); true when the pages now read as zero.
  bool purge_pages(char* addr, size_t len);
  void* allocate_direct(size_t size);
  /// MALLOCX_TCACHE of this thread's cache of the region, or MALLOCX_TCACHE_NONE without one
  /// (never the implicit cache: thread_cache.h).
  int tcache_flag() const;
  /// Flushes this thread's cache of the region and purges the arena's freed slabs.
  void release_cached();
  void free_direct(void* p, uint32_t pages);
  /// Pages of the live block starting at `p` (0: `p` is not a block's start).
  uint32_t direct_pages(const void* p) const;

  char* base_ = nullptr;
  size_t size_ = 0;
  char* map_base_ = nullptr;  // the mmap'd range (base_ aligned inside it)
  size_t map_size_ = 0;
  size_t page_ = 4096;
  size_t small_max_ = 0;
  bool purge_ = true;
  HugePages hugepages_ = HugePages::kOff;
  std::string note_;
  std::unique_ptr<ExtentAllocator> extents_;
  uint32_t* direct_ = nullptr;  // per page: pages of the direct block starting there, or 0
  size_t direct_map_size_ = 0;
  std::atomic<size_t> direct_allocated_{0};
  std::atomic<size_t> arena_extents_{0};
  struct Hooks;                   // the extent hooks (region.cc)
  std::unique_ptr<Hooks> hooks_;  // jemalloc keeps a pointer to it for the arena's lifetime
  unsigned arena_ = 0;
  bool have_arena_ = false;
  size_t prefaulted_ = 0;
  int64_t prefault_ms_ = 0;
  uint64_t id_ = 0;  // unique per region, never reused: its thread caches' owner
};

}  // namespace tiering
