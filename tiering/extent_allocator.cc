#include "tiering/extent_allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>

namespace tiering {

// ---- NodePool ----

NodePool::NodePool(size_t slot_size, size_t max_slots)
    : slot_((slot_size + 15) & ~size_t{15}), max_(max_slots) {
  void* p = mmap(nullptr, slot_ * max_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "extent_allocator: cannot reserve %zu bytes for nodes\n", slot_ * max_);
    std::abort();
  }
  base_ = static_cast<char*>(p);
}

NodePool::~NodePool() { munmap(base_, slot_ * max_); }

void* NodePool::get() {
  if (free_ != nullptr) {
    void* p = free_;
    free_ = *static_cast<void**>(p);
    return p;
  }
  if (used_ == max_) {
    std::fprintf(stderr, "extent_allocator: node pool exhausted (%zu slots)\n", max_);
    std::abort();
  }
  return base_ + slot_ * used_++;
}

void NodePool::put(void* p) {
  *static_cast<void**>(p) = free_;
  free_ = p;
}

// ---- FreeMap ----

FreeMap::FreeMap(NodePool* pool)
    : by_addr_(AddrMap::key_compare(), AddrMap::allocator_type(pool)),
      by_size_(SizeSet::key_compare(), SizeSet::allocator_type(pool)) {}

void FreeMap::add(uintptr_t addr, size_t len) {
  by_addr_.emplace(addr, len);
  by_size_.emplace(len, addr);
  bytes_ += len;
}

void FreeMap::erase(AddrMap::iterator it) {
  by_size_.erase({it->second, it->first});
  bytes_ -= it->second;
  by_addr_.erase(it);
}

void FreeMap::insert(uintptr_t addr, size_t len) {
  const uintptr_t end = addr + len;
  auto next = by_addr_.lower_bound(addr);
  if (next != by_addr_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {
      addr = prev->first;
      len += prev->second;
      erase(prev);
    }
  }
  if (next != by_addr_.end() && next->first == end) {
    len += next->second;
    erase(next);
  }
  add(addr, len);
}

void FreeMap::carve(uintptr_t start, size_t len, uintptr_t a, size_t n) {
  erase(by_addr_.find(start));
  if (a > start) add(start, a - start);
  if (a + n < start + len) add(a + n, start + len - (a + n));
}

std::pair<uintptr_t, size_t> FreeMap::best_fit(size_t len, size_t align) const {
  for (auto it = by_size_.lower_bound({len, 0}); it != by_size_.end(); ++it) {
    const size_t rlen = it->first;
    const uintptr_t start = it->second;
    const uintptr_t a = (start + align - 1) & ~(uintptr_t{align} - 1);
    if (a + len <= start + rlen) return {start, rlen};
  }
  return {0, 0};
}

std::pair<uintptr_t, size_t> FreeMap::containing(uintptr_t addr) const {
  auto it = by_addr_.upper_bound(addr);
  if (it == by_addr_.begin()) return {0, 0};
  --it;
  if (addr >= it->first + it->second) return {0, 0};
  return *it;
}

size_t FreeMap::remove(uintptr_t addr, size_t len) {
  const uintptr_t end = addr + len;
  auto it = by_addr_.upper_bound(addr);
  if (it != by_addr_.begin() && std::prev(it)->first + std::prev(it)->second > addr) --it;
  size_t removed = 0;
  while (it != by_addr_.end() && it->first < end) {
    const uintptr_t s = it->first, e = it->first + it->second;
    auto next = std::next(it);
    erase(it);
    if (s < addr) add(s, addr - s);
    if (e > end) add(end, e - end);
    removed += std::min(e, end) - std::max(s, addr);
    it = next;
  }
  return removed;
}

std::pair<uintptr_t, size_t> FreeMap::pop_front() {
  if (by_addr_.empty()) return {0, 0};
  std::pair<uintptr_t, size_t> r = *by_addr_.begin();
  erase(by_addr_.begin());
  return r;
}

// ---- ExtentAllocator ----

bool ExtentAllocator::inside(uintptr_t a, size_t len) const {
  const auto b = reinterpret_cast<uintptr_t>(base_);
  return a >= b && len <= size_ && a - b <= size_ - len;
}

ExtentAllocator::ExtentAllocator(char* base, size_t size, size_t page, size_t dirty_max,
                                 PurgeFn purge)
    : base_(base),
      size_(size),
      page_(page),
      dirty_max_(dirty_max),
      purge_fn_(std::move(purge)),
      // Free ranges are disjoint and at least a page each, dirty ones too; two nodes per range.
      pool_(64, 2 * (size / page) + 16),
      free_(&pool_),
      dirty_(&pool_),
      clean_zeroed_(purge_fn_ != nullptr) {
  free_.insert(reinterpret_cast<uintptr_t>(base), size);
}

ExtentAllocator::Extent ExtentAllocator::take_warm_locked(size_t size, size_t alignment) {
  auto [d, dlen] = dirty_.best_fit(size, alignment);
  if (d == 0) return {};
  auto [s, slen] = free_.containing(d);
  const uintptr_t mask = ~(uintptr_t{alignment} - 1);
  uintptr_t a = 0;
  if (d == s) {
    a = (d + alignment - 1) & mask;
  } else if (d + dlen == s + slen) {
    a = (d + dlen - size) & mask;
    if (a < d) return {};
  } else {
    return {};  // in the middle of a free range: leave that range whole
  }
  free_.carve(s, slen, a, size);
  dirty_.remove(a, size);
  in_use_ += size;
  return {reinterpret_cast<char*>(a), false};
}

ExtentAllocator::Extent ExtentAllocator::take_locked(size_t size, size_t alignment,
                                                     Prefer prefer) {
  if (prefer == Prefer::kDirty && dirty_.bytes() > 0) {
    Extent e = take_warm_locked(size, alignment);
    if (e.addr != nullptr) return e;
  }
  auto [s, len] = free_.best_fit(size, alignment);
  if (s == 0) return {};
  const uintptr_t a = (s + alignment - 1) & ~(uintptr_t{alignment} - 1);
  free_.carve(s, len, a, size);
  const bool dirty = dirty_.remove(a, size) > 0;
  in_use_ += size;
  return {reinterpret_cast<char*>(a), !dirty && clean_zeroed_};
}

ExtentAllocator::Extent ExtentAllocator::allocate(size_t size, size_t alignment, Prefer prefer) {
  alignment = std::max(alignment, page_);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    Extent e = take_locked(size, alignment, prefer);
    if (e.addr != nullptr || purging_ == 0) return e;
    // Ranges being purged are out of the free map for the moment: wait for them.
    purged_.wait(lk, [&] { return purging_ == 0; });
  }
}

ExtentAllocator::Extent ExtentAllocator::allocate_at(char* addr, size_t size) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (!inside(a, size)) return {};
  std::lock_guard<std::mutex> lk(mu_);
  auto [s, len] = free_.containing(a);
  if (s == 0 || a + size > s + len) return {};
  free_.carve(s, len, a, size);
  const bool dirty = dirty_.remove(a, size) > 0;
  in_use_ += size;
  return {addr, !dirty && clean_zeroed_};
}

void ExtentAllocator::release(char* addr, size_t size, bool dirty) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (!inside(a, size)) {
    std::fprintf(stderr, "extent_allocator: release of %p+%zu outside the region\n", addr, size);
    std::abort();
  }
  std::unique_lock<std::mutex> lk(mu_);
  in_use_ -= size;
  free_.insert(a, size);
  if (dirty && purge_fn_) {
    dirty_.insert(a, size);
    if (dirty_.bytes() > dirty_max_) purge_locked(lk, dirty_max_ / 2);
  } else if (dirty) {
    clean_zeroed_ = false;  // without purging, free pages promise nothing
  }
}

void ExtentAllocator::purge(size_t keep) {
  std::unique_lock<std::mutex> lk(mu_);
  purge_locked(lk, keep);
}

void ExtentAllocator::purge_locked(std::unique_lock<std::mutex>& lk, size_t keep) {
  if (!purge_fn_) return;
  constexpr int kBatch = 32;
  while (dirty_.bytes() > keep) {
    std::pair<uintptr_t, size_t> batch[kBatch];
    bool zeroed[kBatch];
    int n = 0;
    size_t taken = 0;
    while (n < kBatch && dirty_.bytes() > keep) {
      batch[n] = dirty_.pop_front();
      free_.remove(batch[n].first, batch[n].second);  // not allocatable while being purged
      taken += batch[n].second;
      ++n;
    }
    purging_ += taken;
    lk.unlock();  // madvise of many pages takes milliseconds: not under the lock
    for (int i = 0; i < n; ++i) {
      zeroed[i] = purge_fn_(reinterpret_cast<char*>(batch[i].first), batch[i].second);
    }
    lk.lock();
    for (int i = 0; i < n; ++i) {
      // A failed purge (never expected on our own mapping) still frees the range; clean pages
      // then no longer promise zeroes.
      if (!zeroed[i]) clean_zeroed_ = false;
      free_.insert(batch[i].first, batch[i].second);
    }
    purging_ -= taken;
    purged_.notify_all();
  }
}

ExtentAllocator::Stats ExtentAllocator::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s;
  s.in_use = in_use_;
  s.clean = free_.bytes() - dirty_.bytes();
  s.dirty = dirty_.bytes() + purging_;
  s.ranges = free_.ranges();
  s.largest_free = free_.largest();
  return s;
}

}  // namespace tiering
