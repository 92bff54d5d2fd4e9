#include "tiering/memory_tier.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "tiering/allocator.h"

namespace tiering {

std::atomic<MemoryRegion*> MemoryTier::current_{nullptr};

namespace {
std::mutex g_install_mu;  // serialises the creation of the default region
}  // namespace

bool MemoryTier::start(const RegionOptions& options, std::string* error) {
  std::unique_ptr<MemoryRegion> r = MemoryRegion::create(options, error);
  if (r == nullptr) return false;
  exchange(std::move(r)).release();  // a default region created earlier stays mapped: leaked
  return true;
}

std::unique_ptr<MemoryRegion> MemoryTier::exchange(std::unique_ptr<MemoryRegion> region) {
  std::lock_guard lock(g_install_mu);
  return std::unique_ptr<MemoryRegion>(current_.exchange(region.release()));
}

MemoryRegion& MemoryTier::create_default() {
  std::lock_guard lock(g_install_mu);
  if (MemoryRegion* r = current_.load(std::memory_order_acquire)) return *r;
  std::string error;
  std::unique_ptr<MemoryRegion> r = MemoryRegion::create(RegionOptions{}, &error);
  if (r == nullptr) {
    std::fprintf(stderr, "MemoryTier: cannot create the default memory region: %s\n",
                 error.c_str());
    std::abort();
  }
  current_.store(r.get(), std::memory_order_release);
  return *r.release();  // lives until the process exits (see memory_tier.h)
}

MemoryFigures MemoryTier::figures() {
  MemoryFigures f;
  f.region = region().stats();
  const size_t process = allocator_allocated();
#ifdef STRATAKV_JEMALLOC
  // jemalloc is the process allocator: its stats.allocated counts the region's arena too.
  f.heap = process - std::min(process, f.region.arena_allocated);
#else
  // The sanitizer's allocator is the process allocator; the region's jemalloc arena is apart.
  f.heap = process;
#endif
  return f;
}

}  // namespace tiering
