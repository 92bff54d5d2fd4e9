// tiering/extent_allocator.h - page-granular free-space manager of the memory region.
//
// The MemoryRegion (region.h) hands out pieces of its one mmap'd range from here: extents for
// its jemalloc arena (through jemalloc's extent hooks) and the page-rounded blocks of large
// values. Free space is one address-ordered map of ranges that coalesce on release, whatever
// their pages hold, so a fill after a mass free sees the free space whole. A second map tracks
// which free pages are dirty: freed recently and still resident, kept for warm reuse (a 32 MiB
// value that reuses them takes no page faults) up to `dirty_max` bytes, then purged; the rest
// are clean (returned to the OS or never touched, reading as zero when purging is on).
//
// Allocation is best-fit (smallest fitting range, lowest address on ties), cut from the range's
// low end, which keeps large ranges whole for large values. Callers that prefer warm pages get
// the smallest dirty range that fits instead, when it lies at an end of its free range (taking
// it from the middle would split free space that a later large value may need whole).
//
// Purging (madvise) runs outside the lock, on ranges taken out of the free map meanwhile. The
// maps' nodes come from a pool reserved with mmap, never from malloc: jemalloc calls the hooks
// with its own locks held, and the allocator must not call back into the process allocator
// (which is jemalloc in release builds).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace tiering {

/// Fixed-size slots carved from one mmap'd reservation (lazily backed). Not thread-safe.
class NodePool {
 public:
  /// Reserves room for `max_slots` slots of `slot_size` bytes. Aborts if the reservation fails.
  NodePool(size_t slot_size, size_t max_slots);
  ~NodePool();
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  /// A slot of slot_size() bytes; aborts when all slots are in use (sized so that cannot happen).
  void* get();
  void put(void* p);
  size_t slot_size() const { return slot_; }

 private:
  char* base_;
  size_t slot_;
  size_t max_;
  size_t used_ = 0;         // slots ever handed out (bump pointer)
  void* free_ = nullptr;    // singly linked list of returned slots
};

/// std allocator over a NodePool, for the nodes of std::map / std::set (one node per call).
template <class T>
struct PoolAllocator {
  using value_type = T;
  NodePool* pool;
  explicit PoolAllocator(NodePool* p) : pool(p) {}
  template <class U>
  PoolAllocator(const PoolAllocator<U>& o) : pool(o.pool) {}
  T* allocate(size_t n) {
    if (n != 1 || sizeof(T) > pool->slot_size()) std::abort();  // node containers only
    return static_cast<T*>(pool->get());
  }
  void deallocate(T* p, size_t) { pool->put(p); }
  template <class U>
  bool operator==(const PoolAllocator<U>& o) const { return pool == o.pool; }
};

/// Disjoint ranges by address (coalescing) and by size (best fit).
/// Not thread-safe; ExtentAllocator holds its lock around every call.
class FreeMap {
 public:
  explicit FreeMap(NodePool* pool);
  /// Adds [addr, addr+len), merging with adjacent ranges of this map.
  void insert(uintptr_t addr, size_t len);
  /// The smallest range holding `len` bytes at an `align`-aligned address; {0, 0} if none.
  std::pair<uintptr_t, size_t> best_fit(size_t len, size_t align) const;
  /// Removes the range [start, start+len) and puts back what is left around [a, a+n).
  void carve(uintptr_t start, size_t len, uintptr_t a, size_t n);
  /// The range holding `addr`; {0, 0} if none.
  std::pair<uintptr_t, size_t> containing(uintptr_t addr) const;
  /// Removes whatever part of [addr, addr+len) this map holds; returns the bytes removed.
  size_t remove(uintptr_t addr, size_t len);
  /// Removes and returns the lowest-addressed range; {0, 0} when empty.
  std::pair<uintptr_t, size_t> pop_front();
  size_t bytes() const { return bytes_; }
  size_t ranges() const { return by_addr_.size(); }
  size_t largest() const { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }

 private:
  using AddrMap = std::map<uintptr_t, size_t, std::less<uintptr_t>,
                           PoolAllocator<std::pair<const uintptr_t, size_t>>>;
  using SizeSet = std::set<std::pair<size_t, uintptr_t>, std::less<std::pair<size_t, uintptr_t>>,
                           PoolAllocator<std::pair<size_t, uintptr_t>>>;
  void erase(AddrMap::iterator it);
  void add(uintptr_t addr, size_t len);  // no coalescing

  AddrMap by_addr_;
  SizeSet by_size_;
  size_t bytes_ = 0;
};

/// Page-granular allocator of the region's address range. Thread-safe (one mutex; madvise runs
/// outside it). All sizes and alignments are bytes, multiples of the page.
class ExtentAllocator {
 public:
  /// Returns the pages of [addr, addr+len) to the OS; true when they now read as zero and are
  /// not resident. Called without the allocator's lock.
  using PurgeFn = std::function<bool(char* addr, size_t len)>;

  struct Extent {
    char* addr = nullptr;  ///< null: nothing fits
    bool zeroed = false;   ///< the extent's bytes are all zero
  };
  enum class Prefer { kClean, kDirty };
  struct Stats {
    size_t in_use = 0;        ///< bytes handed out and not released
    size_t clean = 0;         ///< free bytes returned to the OS (or never touched)
    size_t dirty = 0;         ///< free bytes still resident, kept for reuse
    size_t ranges = 0;        ///< free ranges: fragmentation
    size_t largest_free = 0;  ///< largest free range in bytes
  };

  /// Manages [base, base+size). `purge` null means pages are never returned to the OS (pinned
  /// or hugetlb regions): freed pages then go straight to the clean map, which no longer
  /// promises zeroes. `dirty_max`: resident free bytes kept before purging.
  ExtentAllocator(char* base, size_t size, size_t page, size_t dirty_max, PurgeFn purge);
  ExtentAllocator(const ExtentAllocator&) = delete;
  ExtentAllocator& operator=(const ExtentAllocator&) = delete;

  /// `size` bytes at an `alignment`-aligned address; kDirty prefers warm pages (see above).
  /// {nullptr} when the region has no free range that large.
  Extent allocate(size_t size, size_t alignment, Prefer prefer);
  /// Exactly [addr, addr+size) if it is free; {nullptr} otherwise.
  Extent allocate_at(char* addr, size_t size);
  /// Gives back [addr, addr+size). `dirty`: its pages may be resident and non-zero; false when
  /// the caller purged them. May purge (outside the lock) when dirty pages pass dirty_max.
  void release(char* addr, size_t size, bool dirty);
  /// Purges dirty pages until at most `keep` bytes of them remain.
  void purge(size_t keep);
  Stats stats() const;
  size_t page() const { return page_; }

 private:
  bool inside(uintptr_t a, size_t len) const;
  Extent take_locked(size_t size, size_t alignment, Prefer prefer);
  Extent take_warm_locked(size_t size, size_t alignment);
  void purge_locked(std::unique_lock<std::mutex>& lk, size_t keep);

  char* base_;
  size_t size_;
  size_t page_;
  size_t dirty_max_;
  PurgeFn purge_fn_;
  mutable std::mutex mu_;
  std::condition_variable purged_;  // signalled when in-flight purges finish
  NodePool pool_;                   // before the maps: they free nodes into it on destruction
  FreeMap free_;                    // all free ranges, clean or dirty
  FreeMap dirty_;                   // the dirty part of free_
  size_t in_use_ = 0;
  size_t purging_ = 0;              // bytes taken out of both maps and being purged
  bool clean_zeroed_;               // clean pages read as zero (purging works)
};

}  // namespace tiering
