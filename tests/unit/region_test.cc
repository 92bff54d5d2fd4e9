// Unit tests of tiering::MemoryRegion (the value region and its jemalloc arena) and
// tiering::ExtentAllocator: everything handed out lies inside the region, storms from several
// threads with content checks, exhaustion and recovery, RSS after frees, and the utilisation
// figures of DESIGN.md's memory tier (>= 90% of the region holds values of one size).
#include <doctest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "tiering/extent_allocator.h"
#include "tiering/region.h"
#include "tiering/resident_policy.h"
#include "tiering/thread_cache.h"

using tiering::ExtentAllocator;
using tiering::MemoryRegion;
using tiering::ResidentPolicy;
using tiering::RegionOptions;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;  // ASan's shadow of poisoned (freed) bytes stays resident
#else
constexpr bool kAsan = false;
#endif

std::unique_ptr<MemoryRegion> make_region(size_t capacity, RegionOptions o = {}) {
  o.capacity = capacity;
  std::string err;
  auto r = MemoryRegion::create(o, &err);
  INFO(err);
  REQUIRE(r != nullptr);
  return r;
}

size_t rss() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  REQUIRE(std::fscanf(f, "%lu %lu", &size, &resident) == 2);
  std::fclose(f);
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Minor page faults of this process so far (getrusage).
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// A pattern derived from `seed`: every byte of small blocks, one word per 4 KiB and the last
// word of larger ones.
void fill(char* p, size_t n, uint64_t seed) {
  if (n <= 4096) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(seed + i);
    return;
  }
  for (size_t off = 0; off + 16 <= n; off += 4096) {  // not over the last word
    uint64_t w = seed ^ off;
    std::memcpy(p + off, &w, 8);
  }
  uint64_t w = ~seed;
  std::memcpy(p + n - 8, &w, 8);
}

bool check(const char* p, size_t n, uint64_t seed) {
  if (n <= 4096) {
    for (size_t i = 0; i < n; ++i)
      if (p[i] != static_cast<char>(seed + i)) return false;
    return true;
  }
  for (size_t off = 0; off + 16 <= n; off += 4096) {  // not over the last word
    uint64_t w;
    std::memcpy(&w, p + off, 8);
    if (w != (seed ^ off)) return false;
  }
  uint64_t w;
  std::memcpy(&w, p + n - 8, 8);
  return w == ~seed;
}

// Fills the region with blocks of `size` until allocation fails; returns the blocks.
std::vector<void*> fill_region(MemoryRegion& r, size_t size) {
  std::vector<void*> blocks;
  while (void* p = r.allocate(size)) {
    CHECK(r.contains(p, size));
    static_cast<char*>(p)[0] = 1;  // touch the value's first and last page
    static_cast<char*>(p)[size - 1] = 2;
    blocks.push_back(p);
  }
  return blocks;
}

}  // namespace

TEST_CASE("ExtentAllocator: best fit, coalescing, alignment, exact placement") {
  const size_t page = 4096, n = 64 * page;
  char* base = static_cast<char*>(mmap(nullptr, n, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(base != MAP_FAILED);
  size_t purged = 0;
  {
    ExtentAllocator ea(base, n, page, /*dirty_max=*/8 * page, [&](char* a, size_t len) {
      purged += len;
      return madvise(a, len, MADV_DONTNEED) == 0;
    });
    auto a = ea.allocate(4 * page, page, ExtentAllocator::Prefer::kClean);
    auto b = ea.allocate(4 * page, page, ExtentAllocator::Prefer::kClean);
    auto c = ea.allocate(4 * page, page, ExtentAllocator::Prefer::kClean);
    REQUIRE(a.addr == base);  // lowest address among equal fits
    CHECK(a.zeroed);
    CHECK(b.addr == base + 4 * page);
    ea.release(a.addr, 4 * page, /*dirty=*/true);
    // Best fit: the 4-page hole, not the 52-page tail; from the dirty pages, not zeroed.
    auto d = ea.allocate(2 * page, page, ExtentAllocator::Prefer::kDirty);
    CHECK(d.addr == base);
    CHECK_FALSE(d.zeroed);
    ea.release(d.addr, 2 * page, true);
    ea.release(b.addr, 4 * page, true);
    auto s = ea.stats();
    CHECK(s.dirty == 8 * page);  // coalesced into one dirty range [base, base+8p)
    CHECK(s.in_use == 4 * page);
    ea.release(c.addr, 4 * page, true);  // 12 dirty pages > dirty_max: purged down to <= 4
    s = ea.stats();
    CHECK(s.dirty <= 4 * page);
    CHECK(purged >= 8 * page);
    ea.purge(0);
    s = ea.stats();
    CHECK(s.dirty == 0);
    CHECK(s.ranges == 1);  // everything coalesced back
    CHECK(s.largest_free == n);
    auto e = ea.allocate(8 * page, 32 * page, ExtentAllocator::Prefer::kClean);
    CHECK(reinterpret_cast<uintptr_t>(e.addr) % (32 * page) == 0);
    auto f = ea.allocate_at(base + 40 * page, page);
    CHECK(f.addr == base + 40 * page);
    CHECK(ea.allocate_at(base + 40 * page, page).addr == nullptr);  // taken
    CHECK(ea.allocate(n, page, ExtentAllocator::Prefer::kClean).addr == nullptr);
    // Purged pages come back zeroed.
    std::memset(f.addr, 0xee, page);
    ea.release(f.addr, page, true);
    ea.purge(0);
    auto g = ea.allocate_at(base + 40 * page, page);
    REQUIRE(g.addr != nullptr);
    CHECK(g.zeroed);
    CHECK(g.addr[0] == 0);
  }
  {
    ExtentAllocator ea(base, n, page, 8 * page, nullptr);  // no purging: nothing promised
    auto a = ea.allocate(page, page, ExtentAllocator::Prefer::kClean);
    CHECK_FALSE(a.zeroed);
    ea.release(a.addr, page, true);
    CHECK(ea.stats().dirty == 0);
    CHECK(ea.stats().ranges == 1);
  }
  munmap(base, n);
}

TEST_CASE("MemoryRegion: layout, both paths, usable size") {
  auto r = make_region(64 * MiB);
  CHECK(r->size() == 64 * MiB);
  CHECK(reinterpret_cast<uintptr_t>(r->base()) % (2 * MiB) == 0);
  CHECK(r->small_max() == 14 * KiB);  // jemalloc 5.3 with 4 KiB pages
  CHECK(r->contains(r->base(), r->size()));
  CHECK_FALSE(r->contains(r->base() + 1, r->size()));
  CHECK_FALSE(r->contains(r->base() - 1, 1));
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, 14 * KiB, 14 * KiB + 1, 1 * MiB + 3}) {
    char* p = static_cast<char*>(r->allocate(size));
    REQUIRE(p != nullptr);
    size_t usable = r->usable_size(p);
    CHECK(usable >= size);
    CHECK(r->contains(p, usable));
    CHECK(r->offset_of(p) < r->size());
    std::memset(p, 0x5a, usable);  // usable_size() made all of it addressable
    if (size > r->small_max()) CHECK(usable == (size + 4095) / 4096 * 4096);
    r->free(p);
  }
  r->free(nullptr);
  void* a = r->allocate(8 * MiB);
  void* b = r->allocate(8 * MiB);
  r->free(a);
  void* again = r->allocate(8 * MiB);  // the freed block, still resident
  CHECK(again == a);
  r->free(again);
  r->free(b);
  auto s = r->stats();
  CHECK(s.capacity == 64 * MiB);
  CHECK(s.allocated() == 0);
  CHECK(s.arena_extents > 0);  // the slabs it used stay with jemalloc until decay or purge
  r->purge();
  s = r->stats();
  CHECK(s.dirty == 0);
  CHECK(s.arena_active == 0);
}

TEST_CASE("MemoryRegion: every allocation of every size lies inside the region") {
  auto r = make_region(256 * MiB);
  std::mt19937_64 rng(7);
  std::vector<std::pair<void*, size_t>> live;
  for (int i = 0; i < 20000; ++i) {
    size_t size = size_t{1} << (rng() % 23);  // 1 B .. 4 MiB
    size += rng() % size;
    void* p = r->allocate(size);
    if (p == nullptr) break;
    REQUIRE(r->contains(p, r->usable_size(p)));
    live.emplace_back(p, size);
    if (rng() % 3 == 0) {
      std::swap(live[rng() % live.size()], live.back());
      r->free(live.back().first);
      live.pop_back();
    }
  }
  auto s = r->stats();
  CHECK(s.used() <= r->size());
  CHECK(s.arena_extents + s.direct_allocated + s.free == r->size());
  for (auto& [p, size] : live) r->free(p);
}

TEST_CASE("MemoryRegion: alloc/free storm from 4 threads with content checks") {
  auto r = make_region(512 * MiB);
  constexpr int kThreads = 4, kOps = 100000, kLive = 64;
  struct Block {
    char* p;
    size_t n;
    uint64_t seed;
  };
  std::mutex mu;
  std::deque<Block> handoff;  // blocks freed by another thread than the one that wrote them
  std::atomic<int> bad{0}, failed{0}, outside{0};
  auto worker = [&](int t) {
    std::mt19937_64 rng(100 + t);
    std::vector<Block> live;
    auto release = [&](Block b) {
      if (!check(b.p, b.n, b.seed)) bad++;
      r->free(b.p);
    };
    for (int i = 0; i < kOps; ++i) {
      if (live.size() < kLive && rng() % 2 == 0) {
        size_t n = size_t{16} << (rng() % 19);  // 16 B .. 4 MiB, log-uniform
        n += rng() % n;
        n = std::min(n, 4 * MiB);
        char* p = static_cast<char*>(r->allocate(n));
        if (p == nullptr) {
          failed++;
          continue;
        }
        if (!r->contains(p, n)) outside++;
        uint64_t seed = rng();
        fill(p, n, seed);
        live.push_back({p, n, seed});
      } else if (!live.empty()) {
        std::swap(live[rng() % live.size()], live.back());  // random free order
        Block b = live.back();
        live.pop_back();
        if (rng() % 8 == 0) {
          std::lock_guard<std::mutex> lk(mu);
          handoff.push_back(b);
          b = handoff.front();
          handoff.pop_front();
        }
        release(b);
      }
    }
    for (Block& b : live) release(b);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  for (Block& b : handoff) {
    CHECK(check(b.p, b.n, b.seed));
    r->free(b.p);
  }
  CHECK(bad.load() == 0);
  CHECK(outside.load() == 0);
  CHECK(failed.load() == 0);  // the live set (<= 4 x 64 blocks) fits in 512 MiB
  auto s = r->stats();
  CHECK(s.allocated() == 0);
  CHECK(s.direct_allocated == 0);
}

TEST_CASE("MemoryRegion: exhaustion returns null cleanly and recovers after frees") {
  auto r = make_region(64 * MiB);
  auto big = fill_region(*r, 1 * MiB);
  CHECK(big.size() == 64);  // the whole region, nothing lost to jemalloc
  CHECK(r->allocate(100) == nullptr);  // the small path fails cleanly too
  CHECK(r->allocate(size_t{1} << 40) == nullptr);
  for (size_t i = 0; i < big.size(); i += 2) r->free(big[i]);
  CHECK(r->allocate(2 * MiB) == nullptr);  // 32 one-MiB holes, none adjacent
  void* p = r->allocate(1 * MiB);
  CHECK(p != nullptr);
  r->free(p);
  for (size_t i = 1; i < big.size(); i += 2) r->free(big[i]);

  // Small values fill it, then large ones need the slabs jemalloc keeps after the frees.
  auto small = fill_region(*r, 64);
  CHECK(small.size() * 64 >= 60 * MiB);
  CHECK(r->allocate(1 * MiB) == nullptr);
  for (void* q : small) r->free(q);
  void* whole = r->allocate(60 * MiB);
  CHECK(whole != nullptr);
  r->free(whole);
}

TEST_CASE("MemoryRegion: fits() tells whether a block lies free in one piece") {
  auto r = make_region(64 * MiB);
  CHECK(r->fits(8 * MiB));
  auto big = fill_region(*r, 1 * MiB);
  CHECK_FALSE(r->fits(1 * MiB));
  CHECK(r->fits(r->small_max()));  // the arena's sizes: freed bytes count, not one piece
  CHECK_FALSE(r->fits(size_t{1} << 40));
  for (size_t i = 0; i < big.size(); i += 2) r->free(big[i]);
  CHECK(r->fits(1 * MiB));
  CHECK_FALSE(r->fits(2 * MiB));  // 32 one-MiB holes, none adjacent
  r->free(big[1]);                // holes 0, 1, 2 now lie together
  CHECK(r->fits(3 * MiB));
  CHECK_FALSE(r->fits(3 * MiB + 1));
  for (size_t i = 3; i < big.size(); i += 2) r->free(big[i]);

  // Freed slabs of small values count once the arena hands them back: fits() asks it to.
  auto small = fill_region(*r, 64);
  for (void* q : small) r->free(q);
  CHECK(r->fits(60 * MiB));
  void* whole = r->allocate(60 * MiB);
  CHECK(whole != nullptr);
  r->free(whole);
}

TEST_CASE("MemoryRegion: an I/O thread's cache holds region blocks only and goes with the thread or the region") {
  auto r = make_region(64 * MiB);
  // A thread with caches: its frees stay in its cache (counted as allocated), never reach the
  // process's malloc, and come back to the arena when the thread exits.
  std::thread t([&] {
    tiering::enable_thread_caches();
    std::vector<void*> blocks;
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 2000; ++i) {
        void* p = r->allocate(100);
        REQUIRE(p != nullptr);
        std::memset(p, i & 0xff, 100);
        blocks.push_back(p);
      }
      for (void* p : blocks) r->free(p);
      blocks.clear();
    }
    CHECK(r->stats().allocated() > 0);  // cached: still jemalloc's "allocated"
    for (int i = 0; i < 2000; ++i) {
      void* p = std::malloc(100);
      CHECK_FALSE(r->contains(p, 1));
      std::free(p);
    }
  });
  t.join();
  CHECK(r->stats().allocated() == 0);  // the thread's exit gave its cache back

  // A region destroyed while a thread with a cache of it lives: the region takes the cache
  // back; the thread later uses another region and exits without touching the first's.
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;
  auto r2 = make_region(16 * MiB);
  std::thread u([&] {
    tiering::enable_thread_caches();
    for (int i = 0; i < 100; ++i) r->free(r->allocate(64));
    {
      std::unique_lock lock(mu);
      step = 1;
      cv.notify_all();
      cv.wait(lock, [&] { return step == 2; });
    }
    void* p = r2->allocate(64);
    CHECK(p != nullptr);
    r2->free(p);
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return step == 1; });
  }
  r.reset();
  {
    std::lock_guard lock(mu);
    step = 2;
  }
  cv.notify_all();
  u.join();
  CHECK(r2->stats().allocated() == 0);
}

TEST_CASE("MemoryRegion: freed pages stay resident until trimmed or purged") {
  auto r = make_region(512 * MiB);
  const size_t before = rss();
  std::vector<void*> blocks;
  for (int i = 0; i < 256; ++i) {  // 256 MiB of 1 MiB values (the large path)
    void* p = r->allocate(1 * MiB);
    REQUIRE(p != nullptr);
    std::memset(p, 1, 1 * MiB);
    blocks.push_back(p);
  }
  for (int i = 0; i < 16384; ++i) {  // 64 MiB of 4 KiB values (the arena's slabs)
    void* p = r->allocate(4 * KiB);
    REQUIRE(p != nullptr);
    std::memset(p, 2, 4 * KiB);
    blocks.push_back(p);
  }
  const size_t full = rss();
  const size_t touched = 320 * MiB, shadow = kAsan ? touched / 8 : 0;
  CHECK(full - before >= touched - 8 * MiB);
  for (void* p : blocks) r->free(p);
  const size_t freed = rss();
  // The large values' pages stay for reuse (no bound by default): RSS hardly moves, and the
  // same bytes allocated again take no page fault.
  CHECK(freed + 16 * MiB >= full);
  CHECK(r->stats().dirty >= 256 * MiB);
  const long faults = minor_faults();
  for (int i = 0; i < 256; ++i) {
    void* p = r->allocate(1 * MiB);
    REQUIRE(p != nullptr);
    std::memset(p, 3, 1 * MiB);
    blocks[i] = p;
  }
  CHECK(minor_faults() - faults < 1024);  // 256 MiB fresh would be 65536 faults
  for (int i = 0; i < 256; ++i) r->free(blocks[i]);
  // trim() gives back all but `keep` of them, purge() everything.
  r->trim(64 * MiB);
  CHECK(r->stats().dirty <= 64 * MiB);
  const size_t trimmed = rss();
  CHECK(freed - trimmed >= 256 * MiB - 64 * MiB - shadow - 16 * MiB);
  r->purge();
  const size_t purged = rss();
  MESSAGE("RSS MiB: before " << before / MiB << ", full " << full / MiB << ", freed "
                             << freed / MiB << ", trimmed " << trimmed / MiB << ", purged "
                             << purged / MiB);
  CHECK(full - purged >= touched - shadow - 16 * MiB);
  CHECK(r->stats().dirty == 0);
}

TEST_CASE("MemoryRegion: prefault touches the pages at creation, never beyond the region") {
  RegionOptions o;
  o.capacity = 64 * MiB;
  o.prefault = 32 * MiB;
  auto r = MemoryRegion::create(o);
  REQUIRE(r != nullptr);
  CHECK(r->prefaulted() == 32 * MiB);
  CHECK(r->stats().dirty == 32 * MiB);
  const long faults = minor_faults();
  void* p = r->allocate(16 * MiB);  // prefers the warm pages
  REQUIRE(p != nullptr);
  std::memset(p, 1, 16 * MiB);
  CHECK(minor_faults() - faults < 256);
  r->free(p);
  o.prefault = 1024 * MiB;  // more than the region: clamped
  auto whole = MemoryRegion::create(o);
  REQUIRE(whole != nullptr);
  CHECK(whole->prefaulted() == 64 * MiB);
}

TEST_CASE("ResidentPolicy: pages go back only after use stays far below the limit") {
  ResidentPolicy p;
  const size_t limit = 1024 * MiB;
  CHECK(p.to_purge(0, 900 * MiB, limit, 100 * MiB) == 0);  // busy: keep everything
  CHECK(p.to_purge(1000, 100 * MiB, limit, 800 * MiB) == 0);  // low, but not for long yet
  CHECK(p.to_purge(1000 + ResidentPolicy::kHoldMs - 1, 100 * MiB, limit, 800 * MiB) == 0);
  CHECK(p.to_purge(1000 + ResidentPolicy::kHoldMs, 100 * MiB, limit, 300 * MiB) ==
        300 * MiB - limit / 8);  // down to an eighth of the limit
  CHECK(p.to_purge(20000, 100 * MiB, limit, limit / 8) == 0);  // nothing above the keep
  CHECK(p.to_purge(20000, 600 * MiB, limit, 400 * MiB) == 0);   // busy again: the hold restarts
  CHECK(p.to_purge(20001, 100 * MiB, limit, 400 * MiB) == 0);
  // A large excess goes in steps.
  ResidentPolicy q;
  CHECK(q.to_purge(0, 0, size_t{64} << 30, 0) == 0);
  CHECK(q.to_purge(ResidentPolicy::kHoldMs, 0, size_t{64} << 30, size_t{40} << 30) ==
        ResidentPolicy::kStepBytes);
  CHECK(q.to_purge(0, 0, 0, 100) == 0);  // no limit known: nothing
}

// Fills `r` with values of `size` until allocation fails, reports the figure, frees them all.
double utilisation(MemoryRegion& r, size_t size) {
  auto blocks = fill_region(r, size);
  const double util = static_cast<double>(blocks.size() * size) / static_cast<double>(r.size());
  auto s = r.stats();
  MESSAGE("value size " << size << ": " << blocks.size() << " values, utilisation "
                        << util * 100 << "%, arena extents " << s.arena_extents / KiB
                        << " KiB, free " << s.free / KiB << " KiB in " << s.free_ranges
                        << " ranges");
  for (void* p : blocks) r.free(p);
  return util;
}

TEST_CASE("MemoryRegion: >= 90% of the region holds values of one size, across refills") {
  auto r = make_region(1024 * MiB);
  // Each size refills what the previous one left: jemalloc's slabs, large blocks, both.
  for (size_t size : {4 * KiB, 1 * MiB, 32 * MiB, 32 * MiB + 16, 4 * KiB, 32 * MiB + 16, 1 * MiB,
                      32 * MiB, 4 * KiB}) {
    CHECK(utilisation(*r, size) >= 0.90);
  }
  // Other sizes, for the record: page rounding of a 20 KiB + 1 value leaves 83%.
  for (size_t size : {20 * KiB + 1, 5 * MiB + 1}) utilisation(*r, size);
  auto small = make_region(64 * MiB);
  // jemalloc's size classes: 100 B takes 112 (89%), 1000 B takes 1024.
  for (size_t size : {size_t{64}, size_t{100}, size_t{1000}, 4 * KiB}) utilisation(*small, size);
}

TEST_CASE("MemoryRegion: options (huge pages, no purge) and two regions at once") {
  RegionOptions o;
  o.hugepages = true;
  auto a = make_region(64 * MiB, o);
  MESSAGE("hugepages mode " << static_cast<int>(a->hugepages()) << ": " << a->note());
  if (a->hugepages() != tiering::HugePages::kHugetlb) CHECK_FALSE(a->note().empty());
  o = {};
  o.purge = false;
  auto b = make_region(64 * MiB, o);
  CHECK(a->arena() != b->arena());
  std::vector<void*> pa, pb;
  for (size_t size : {size_t{48}, 4 * KiB, 3 * MiB}) {
    pa.push_back(a->allocate(size));
    pb.push_back(b->allocate(size));
    CHECK(a->contains(pa.back(), size));
    CHECK(b->contains(pb.back(), size));
    std::memset(pb.back(), 7, size);
  }
  for (void* p : pb) b->free(p);
  b->purge();  // a no-op without purging, and harmless
  CHECK(b->stats().allocated() == 0);
  const unsigned arena_b = b->arena();
  b.reset();
  auto c = make_region(16 * MiB);
  CHECK(c->arena() == arena_b);  // a destroyed arena's index is reused
  for (void* p : pa) a->free(p);
}
