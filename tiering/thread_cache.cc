// tiering/thread_cache.cc - explicit jemalloc thread caches for the memory region (thread_cache.h).
#include "tiering/thread_cache.h"

#include <jemalloc/jemalloc.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace tiering {

constinit thread_local ThreadCacheSlot t_region_cache;

namespace {

// Which region each live cache index holds blocks of. Leaked: threads exit after statics go.
struct Registry {
  std::mutex mu;
  std::unordered_map<unsigned, uint64_t> owner;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// Destroys cache `index` if it still belongs to `owner` (its blocks go back to that arena).
// Under registry().mu.
void destroy_locked(Registry& reg, unsigned index, uint64_t owner) {
  auto it = reg.owner.find(index);
  if (it == reg.owner.end() || it->second != owner) return;
  mallctl("tcache.destroy", nullptr, nullptr, &index, sizeof(index));
  reg.owner.erase(it);
}

constexpr int kSlots = 4;  // regions a thread keeps caches for (tests run a few at once)
constinit thread_local bool t_exited = false;   // this thread's ThreadCaches are gone
constinit thread_local bool t_enabled = false;  // enable_thread_caches() was called

// The calling thread's caches; destroyed at thread exit.
struct ThreadCaches {
  ThreadCacheSlot slots[kSlots];
  int next = 0;  // the slot to reuse when all are taken
  ~ThreadCaches() {
    Registry& reg = registry();
    std::lock_guard lock(reg.mu);
    for (ThreadCacheSlot& s : slots)
      if (s.owner != 0 && s.tcache >= 0)
        destroy_locked(reg, static_cast<unsigned>(s.tcache), s.owner);
    // A region call later in this thread's exit (another thread-local's destructor) goes
    // without a cache.
    t_exited = true;
    t_region_cache = {UINT64_MAX, -1};
  }
};
thread_local ThreadCaches t_caches;

}  // namespace

void enable_thread_caches() {
  t_enabled = true;
  t_region_cache = {};  // the next region call looks again
}

int thread_cache_slow(uint64_t owner) {
  if (t_exited || !t_enabled) {
    t_region_cache = {owner, -1};  // no cache: the fast path says so from now on
    return -1;
  }
  ThreadCaches& mine = t_caches;
  for (ThreadCacheSlot& s : mine.slots) {
    if (s.owner == owner) {
      t_region_cache = s;
      return s.tcache;
    }
  }
  ThreadCacheSlot& slot = mine.slots[mine.next];
  mine.next = (mine.next + 1) % kSlots;
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  if (slot.owner != 0 && slot.tcache >= 0)
    destroy_locked(reg, static_cast<unsigned>(slot.tcache), slot.owner);
  unsigned index = 0;
  size_t sz = sizeof(index);
  slot = {owner, -1};
  if (mallctl("tcache.create", &index, &sz, nullptr, 0) == 0) {
    reg.owner[index] = owner;
    slot.tcache = static_cast<int>(index);
  }
  t_region_cache = slot;
  return slot.tcache;
}

void flush_thread_cache(uint64_t owner) {
  if (t_exited || !t_enabled) return;
  for (const ThreadCacheSlot& s : t_caches.slots) {
    if (s.owner != owner || s.tcache < 0) continue;
    unsigned index = static_cast<unsigned>(s.tcache);
    mallctl("tcache.flush", nullptr, nullptr, &index, sizeof(index));
  }
}

void destroy_thread_caches(uint64_t owner) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mu);
  for (auto it = reg.owner.begin(); it != reg.owner.end();) {
    if (it->second != owner) {
      ++it;
      continue;
    }
    unsigned index = it->first;
    mallctl("tcache.destroy", nullptr, nullptr, &index, sizeof(index));
    it = reg.owner.erase(it);
  }
}

}  // namespace tiering
