#include "tiering/region.h"
#include "tiering/thread_cache.h"

#include <jemalloc/jemalloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define REGION_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define REGION_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define REGION_POISON(p, n) ((void)(p), (void)(n))
#define REGION_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tiering {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

template <class T>
bool ctl_write(const std::string& name, T value) {
  return mallctl(name.c_str(), nullptr, nullptr, &value, sizeof(value)) == 0;
}

template <class T>
T ctl_read(const std::string& name) {
  T value{};
  size_t sz = sizeof(value);
  if (mallctl(name.c_str(), &value, &sz, nullptr, 0) != 0) return T{};
  return value;
}

std::string arena_ctl(unsigned arena, const char* leaf) {
  return "arena." + std::to_string(arena) + "." + leaf;
}

// jemalloc's arena_config_t (internal, 5.3), the argument of experimental.arenas_create_ext.
// jemalloc checks the size; a mismatch fails with EINVAL and we fall back to arenas.create.
struct ArenaConfig {
  extent_hooks_t* extent_hooks;
  bool metadata_use_hooks;
};

}  // namespace

// The extent hooks. jemalloc calls them from any thread, with its own locks held; they take
// only the ExtentAllocator's lock and never allocate from the heap. Return values follow
// jemalloc(3): false = success.
struct MemoryRegion::Hooks {
  extent_hooks_t table;  // first member: jemalloc passes &table back to every hook
  MemoryRegion* region;

  static MemoryRegion* of(extent_hooks_t* h) { return reinterpret_cast<Hooks*>(h)->region; }

  static void* alloc(extent_hooks_t* h, void* new_addr, size_t size, size_t alignment,
                     bool* zero, bool* commit, unsigned) {
    MemoryRegion* r = of(h);
    ExtentAllocator::Extent e =
        new_addr != nullptr
            ? r->extents_->allocate_at(static_cast<char*>(new_addr), size)
            : r->extents_->allocate(size, alignment, ExtentAllocator::Prefer::kClean);
    if (e.addr == nullptr) return nullptr;
    // The extent is jemalloc's now; its own memset/memcpy (through libc) must not trip ASan.
    REGION_UNPOISON(e.addr, size);
    if (*zero && !e.zeroed) std::memset(e.addr, 0, size);
    else *zero = e.zeroed;
    *commit = true;  // the whole region is always readable and writable
    r->arena_extents_.fetch_add(size, std::memory_order_relaxed);
    return e.addr;
  }

  // Takes the extent back (returns false) rather than letting jemalloc retain it: the region's
  // free space is shared with the large-value path.
  static bool dalloc(extent_hooks_t* h, void* addr, size_t size, bool committed, unsigned) {
    give_back(of(h), addr, size, committed);
    return false;
  }

  static void destroy(extent_hooks_t* h, void* addr, size_t size, bool committed, unsigned) {
    give_back(of(h), addr, size, committed);
  }

  // A committed extent goes to the dirty pages, where it coalesces with its neighbours before
  // being purged in large ranges (jemalloc hands freed slabs back one by one: a madvise each
  // would cost more than the allocations). A decommitted one was purged already (decommit).
  static void give_back(MemoryRegion* r, void* addr, size_t size, bool committed) {
    r->arena_extents_.fetch_sub(size, std::memory_order_relaxed);
    r->extents_->release(static_cast<char*>(addr), size, /*dirty=*/committed);
  }

  static bool commit(extent_hooks_t*, void*, size_t, size_t, size_t, unsigned) { return false; }

  // Decommit and forced purge must leave pages reading as zero: MADV_DONTNEED does for private
  // anonymous memory. Without purging, report failure and jemalloc keeps the pages as they are.
  static bool decommit(extent_hooks_t* h, void* addr, size_t, size_t offset, size_t length,
                       unsigned) {
    return !of(h)->purge_pages(static_cast<char*>(addr) + offset, length);
  }

  static bool purge_lazy(extent_hooks_t* h, void* addr, size_t, size_t offset, size_t length,
                         unsigned) {
    if (!of(h)->purge_) return true;
    return madvise(static_cast<char*>(addr) + offset, length, MADV_FREE) != 0;
  }

  // The ExtentAllocator does not track jemalloc's extent boundaries, so any split or merge of
  // extents inside the region is fine. Failing them would stop jemalloc from reusing extents
  // at other sizes.
  static bool split(extent_hooks_t*, void*, size_t, size_t, size_t, bool, unsigned) {
    return false;
  }
  static bool merge(extent_hooks_t*, void*, size_t, void*, size_t, bool, unsigned) {
    return false;
  }
};

std::unique_ptr<MemoryRegion> MemoryRegion::create(const RegionOptions& options,
                                                   std::string* error) {
  std::unique_ptr<MemoryRegion> r(new MemoryRegion());
  std::string err;
  if (!r->init(options, &err)) {
    if (error != nullptr) *error = err;
    return nullptr;
  }
  return r;
}

bool MemoryRegion::init(const RegionOptions& options, std::string* error) {
  page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (options.capacity == 0 || options.capacity / page_ >= (size_t{1} << 32)) {
    *error = "memory region capacity must be between one page and 16 TiB";
    return false;
  }
  if (!map(options, error)) return false;

  // One uint32 per page: the length in pages of the large block starting there. Lets free()
  // tell large blocks from jemalloc's without a lock.
  direct_map_size_ = round_up(size_ / page_ * sizeof(uint32_t), page_);
  void* t = mmap(nullptr, direct_map_size_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (t == MAP_FAILED) {
    *error = errno_text("mmap of the region's page table");
    return false;
  }
  direct_ = static_cast<uint32_t*>(t);

  size_t dirty_max = options.dirty_max < 0 ? SIZE_MAX : static_cast<size_t>(options.dirty_max);
  ExtentAllocator::PurgeFn purge;
  if (purge_) purge = [this](char* addr, size_t len) { return purge_pages(addr, len); };
  extents_ = std::make_unique<ExtentAllocator>(base_, size_, page_, dirty_max, std::move(purge));
  if (!create_arena(error)) return false;
  if (!ctl_write<ssize_t>(arena_ctl(arena_, "dirty_decay_ms"), options.dirty_decay_ms)) {
    *error = "jemalloc: invalid dirty_decay_ms " + std::to_string(options.dirty_decay_ms);
    return false;
  }
  if (options.prefault > 0) prefault(std::min(round_up(options.prefault, page_), size_));
  return true;
}

void MemoryRegion::prefault(size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  ExtentAllocator::Extent e = extents_->allocate(bytes, page_, ExtentAllocator::Prefer::kClean);
  if (e.addr == nullptr) return;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif
  // One call faults every page in writable; older kernels get one write per page instead.
  if (madvise(e.addr, bytes, MADV_POPULATE_WRITE) != 0) {
    for (size_t off = 0; off < bytes; off += page_) static_cast<volatile char*>(e.addr)[off] = 0;
  }
  extents_->release(e.addr, bytes, /*dirty=*/true);
  prefaulted_ = bytes;
  prefault_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - start).count();
}

bool MemoryRegion::map(const RegionOptions& options, std::string* error) {
  size_ = round_up(options.capacity, kHugePage);
  purge_ = options.purge;
  if (options.hugepages) {
    // No MAP_NORESERVE: the pool's pages are reserved now, so a later fault cannot SIGBUS.
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p != MAP_FAILED) {
      base_ = map_base_ = static_cast<char*>(p);
      map_size_ = size_;
      hugepages_ = HugePages::kHugetlb;
      purge_ = false;
      return true;
    }
    note_ = errno_text("MAP_HUGETLB") + " (hugetlb pool too small?)";
  }
  // Reserve 2 MiB more and trim, so the region starts on a huge-page boundary.
  map_size_ = size_ + kHugePage;
  void* p = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    *error = errno_text("mmap of the memory region");
    return false;
  }
  char* raw = static_cast<char*>(p);
  base_ = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePage));
  if (base_ > raw) munmap(raw, base_ - raw);
  if (raw + map_size_ > base_ + size_) munmap(base_ + size_, raw + map_size_ - (base_ + size_));
  map_base_ = base_;
  map_size_ = size_;
  if (!options.hugepages) return true;

  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream mode;
  mode << thp.rdbuf();
  if (mode.str().find("[never]") != std::string::npos) {
    note_ += "; transparent huge pages are disabled (transparent_hugepage/enabled: never)";
  } else if (madvise(base_, size_, MADV_HUGEPAGE) != 0) {
    note_ += "; " + errno_text("MADV_HUGEPAGE");
  } else {
    hugepages_ = HugePages::kTransparent;
    note_ += "; using transparent huge pages";
  }
  return true;
}

bool MemoryRegion::create_arena(std::string* error) {
  hooks_ = std::make_unique<Hooks>();
  hooks_->table = {Hooks::alloc,  Hooks::dalloc,     Hooks::destroy,
                   Hooks::commit, Hooks::decommit,   Hooks::purge_lazy,
                   Hooks::decommit /* purge_forced */, Hooks::split, Hooks::merge};
  hooks_->region = this;

  // Keep jemalloc's own metadata (arena, extent descriptors) out of the region where jemalloc
  // supports it; otherwise it takes a 2 MiB block of the region.
  unsigned arena = 0;
  size_t sz = sizeof(arena);
  ArenaConfig config{&hooks_->table, /*metadata_use_hooks=*/false};
  if (mallctl("experimental.arenas_create_ext", &arena, &sz, &config, sizeof(config)) != 0) {
    extent_hooks_t* table = &hooks_->table;
    sz = sizeof(arena);
    int rc = mallctl("arenas.create", &arena, &sz, &table, sizeof(table));
    if (rc != 0) {
      *error = std::string("jemalloc arenas.create: ") + std::strerror(rc);
      return false;
    }
  }
  arena_ = arena;
  have_arena_ = true;
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);

  // Grow by what is asked, not geometrically (jemalloc's default starts at 2 MiB and keeps
  // growing): the grown remainder would be retained by jemalloc, out of the large path's reach.
  // Freed slabs go from dirty straight to the dalloc hook: no MADV_FREE'd limbo that still
  // counts in RSS and that the large path cannot use.
  if (!ctl_write<size_t>(arena_ctl(arena_, "retain_grow_limit"), page_) ||
      !ctl_write<ssize_t>(arena_ctl(arena_, "muzzy_decay_ms"), 0)) {
    *error = "jemalloc: cannot tune the region's arena (retain_grow_limit, muzzy_decay_ms)";
    return false;
  }

  unsigned nbins = ctl_read<unsigned>("arenas.nbins");
  small_max_ = ctl_read<size_t>("arenas.bin." + std::to_string(nbins - 1) + ".size");
  if (nbins == 0 || small_max_ == 0) {
    *error = "jemalloc: cannot read the small size classes";
    return false;
  }
  return true;
}

MemoryRegion::~MemoryRegion() {
  // Every thread's cache of this region goes back to the arena first; destroying the arena
  // then hands its extents back through the hooks, so extents_ must be alive.
  if (have_arena_) {
    destroy_thread_caches(id_);
    mallctl(arena_ctl(arena_, "destroy").c_str(), nullptr, nullptr, nullptr, 0);
  }
  if (base_ != nullptr) {
    REGION_UNPOISON(base_, size_);  // stale poison would hit whatever is mapped here next
    munmap(map_base_, map_size_);
  }
  if (direct_ != nullptr) munmap(direct_, direct_map_size_);
}

bool MemoryRegion::purge_pages(char* addr, size_t len) {
  return purge_ && madvise(addr, len, MADV_DONTNEED) == 0;
}

uint32_t MemoryRegion::direct_pages(const void* p) const {
  const size_t off = offset_of(p);
  if (off % page_ != 0) return 0;
  return std::atomic_ref<uint32_t>(direct_[off / page_]).load(std::memory_order_relaxed);
}

int MemoryRegion::tcache_flag() const {
  const int tc = thread_cache(id_);
  return tc >= 0 ? MALLOCX_TCACHE(tc) : MALLOCX_TCACHE_NONE;
}

void MemoryRegion::release_cached() {
  // This thread's cached blocks back to their slabs, then jemalloc's freed slabs back to the
  // region, where they coalesce with their neighbours.
  flush_thread_cache(id_);
  mallctl(arena_ctl(arena_, "purge").c_str(), nullptr, nullptr, nullptr, 0);
}

void* MemoryRegion::allocate(size_t size) {
  if (size == 0) size = 1;
  auto take = [&] {
    return size > small_max_ ? allocate_direct(size)
                             : mallocx(size, MALLOCX_ARENA(arena_) | tcache_flag());
  };
  void* p = take();
  if (p == nullptr) {
    // jemalloc keeps freed slabs for dirty_decay_ms and does not give them up for another size
    // class or for the large path: have it hand them back to the region, then retry once.
    release_cached();
    p = take();
    if (p == nullptr) return nullptr;
  }
  REGION_UNPOISON(p, size);
  return p;
}

void* MemoryRegion::allocate_direct(size_t size) {
  if (size > size_) return nullptr;
  const size_t len = round_up(size, page_);
  auto e = extents_->allocate(len, page_, ExtentAllocator::Prefer::kDirty);
  if (e.addr == nullptr) return nullptr;
  // Published to other threads by whatever hands them the pointer; the page was cleared before
  // it was last released (under the allocator's lock).
  std::atomic_ref<uint32_t>(direct_[offset_of(e.addr) / page_])
      .store(static_cast<uint32_t>(len / page_), std::memory_order_relaxed);
  direct_allocated_.fetch_add(len, std::memory_order_relaxed);
  return e.addr;
}

void MemoryRegion::free(void* p) {
  if (p == nullptr) return;
  if (!contains(p, 1)) {
    std::fprintf(stderr, "MemoryRegion::free: %p is outside the region\n", p);
    std::abort();
  }
  if (uint32_t pages = direct_pages(p)) {
    free_direct(p, pages);
    return;
  }
#if defined(__SANITIZE_ADDRESS__)
  REGION_POISON(p, sallocx(p, 0));
#endif
  // Never the implicit thread cache: it would hand the block to plain malloc(). This thread's
  // cache of the region (thread_cache.h) holds region blocks only.
  dallocx(p, tcache_flag());
}

void MemoryRegion::free_direct(void* p, uint32_t pages) {
  const size_t len = size_t{pages} * page_;
  std::atomic_ref<uint32_t>(direct_[offset_of(p) / page_]).store(0, std::memory_order_relaxed);
  direct_allocated_.fetch_sub(len, std::memory_order_relaxed);
  REGION_POISON(p, len);
  extents_->release(static_cast<char*>(p), len, /*dirty=*/true);
}

size_t MemoryRegion::usable_size(void* p) {
  const uint32_t pages = direct_pages(p);
  const size_t n = pages != 0 ? size_t{pages} * page_ : sallocx(p, 0);
  REGION_UNPOISON(p, n);
  return n;
}

bool MemoryRegion::fits(size_t size) {
  if (size <= small_max_) return true;
  if (size > size_) return false;
  const size_t len = round_up(size, page_);
  if (extents_->stats().largest_free >= len) return true;
  release_cached();
  return extents_->stats().largest_free >= len;
}

void MemoryRegion::purge() {
  release_cached();
  extents_->purge(0);
}

void MemoryRegion::trim(size_t keep) { extents_->purge(keep); }

RegionStats MemoryRegion::stats() const {
  uint64_t epoch = 1;
  size_t sz = sizeof(epoch);
  mallctl("epoch", &epoch, &sz, &epoch, sz);  // refresh jemalloc's statistics
  const std::string prefix = "stats.arenas." + std::to_string(arena_) + ".";
  RegionStats s;
  s.capacity = size_;
  s.arena_extents = arena_extents_.load(std::memory_order_relaxed);
  s.arena_active = ctl_read<size_t>(prefix + "pactive") * ctl_read<size_t>("arenas.page");
  s.arena_allocated =
      ctl_read<size_t>(prefix + "small.allocated") + ctl_read<size_t>(prefix + "large.allocated");
  s.direct_allocated = direct_allocated_.load(std::memory_order_relaxed);
  ExtentAllocator::Stats e = extents_->stats();
  s.dirty = e.dirty;
  s.free = e.clean + e.dirty;
  s.free_ranges = e.ranges;
  s.largest_free = e.largest_free;
  return s;
}

}  // namespace tiering
