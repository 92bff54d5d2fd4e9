// Unit tests of tiering::ValueRef and tiering::MemoryTier: a value is one block inside the
// process's memory region (header + bytes), its offset round-trips, its reference count holds
// across threads, the sole holder is detected, and a full region makes allocate() return null.
#include <doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tiering/memory_tier.h"
#include "tiering/value.h"

using tiering::MemoryRegion;
using tiering::MemoryTier;
using tiering::Value;
using tiering::ValueRef;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

// Installs a region of `capacity` bytes as the process's region for the scope of a test and
// puts the previous one back. Every value of the test must be released inside the scope.
class ScopedRegion {
 public:
  explicit ScopedRegion(size_t capacity) {
    tiering::RegionOptions o;
    o.capacity = capacity;
    std::string err;
    auto r = MemoryRegion::create(o, &err);
    INFO(err);
    REQUIRE(r != nullptr);
    region_ = r.get();
    previous_ = MemoryTier::exchange(std::move(r));
  }
  ~ScopedRegion() { MemoryTier::exchange(std::move(previous_)); }
  MemoryRegion& region() { return *region_; }
  size_t allocated() const { return region_->stats().allocated(); }

 private:
  MemoryRegion* region_;
  std::unique_ptr<MemoryRegion> previous_;
};

}  // namespace

TEST_CASE("value: one block inside the region, 16-byte aligned, offset round-trips") {
  ScopedRegion scope(64 * MiB);
  MemoryRegion& region = scope.region();
  const size_t sizes[] = {0,        1,         15,       16,       100,      4096,
                          14 * KiB, 16 * KiB,  1 * MiB,  1 * MiB + 1, 32 * MiB};
  std::vector<ValueRef> values;
  for (size_t size : sizes) {
    ValueRef v = ValueRef::allocate(size);
    REQUIRE(v);
    CHECK(v->size() == size);
    CHECK(v->capacity() >= size);
    if (size < Value::kSplitThreshold) {
      CHECK(v->allocated() == v->capacity() + Value::kHeaderSize);
      CHECK(region.contains(v.get(), v->allocated()));  // header and every usable byte
    } else {  // header on the heap, bytes alone in the region
      CHECK(v->allocated() == v->capacity() + Value::kSplitHeaderSize);
      CHECK_FALSE(region.contains(v.get(), 1));
      CHECK(region.contains(v->data(), v->capacity()));
    }
    CHECK(reinterpret_cast<uintptr_t>(v->data()) % 16 == 0);
    CHECK(region.base() + v->region_offset() == v->data());
    CHECK(v->region_offset() == region.offset_of(v->data()));
    std::memset(v->data(), 'x', v->capacity());  // every usable byte is writable
    values.push_back(std::move(v));
  }
  // Small values take jemalloc's size class of size + header: 100 bytes -> 128.
  CHECK(values[4]->allocated() == 128);
  // Larger ones take exactly their size class: 4 KiB -> 4 KiB, 1 MiB -> 256 pages.
  CHECK(values[5]->capacity() == 4096);
  CHECK(values[8]->capacity() == 1 * MiB);
  CHECK(values[10]->capacity() == 32 * MiB);
  const size_t live = scope.allocated();
  CHECK(live >= 32 * MiB + 2 * MiB);
  values.clear();
  CHECK(scope.allocated() == 0);
}

TEST_CASE("value: copy_of, resize, modified flag, move and self-assignment") {
  ScopedRegion scope(8 * MiB);
  ValueRef v = ValueRef::copy_of("hello");
  REQUIRE(v);
  CHECK(v->view() == "hello");
  CHECK_FALSE(v->modified());
  CHECK(v->capacity() >= 5);
  v->resize(3);
  v->set_modified();
  CHECK(v->view() == "hel");
  CHECK(v->modified());

  ValueRef w = std::move(v);
  CHECK_FALSE(v);
  CHECK(v == nullptr);
  CHECK(v.use_count() == 0);
  CHECK(w.use_count() == 1);
  ValueRef& alias = w;
  w = alias;             // self copy-assignment keeps the value
  CHECK(w.use_count() == 1);
  w = std::move(alias);  // self move-assignment too
  REQUIRE(w);
  CHECK(w->view() == "hel");
  ValueRef empty = ValueRef::copy_of("");
  REQUIRE(empty);
  CHECK(empty->size() == 0);
  w.reset();
  empty.reset();
  CHECK(scope.allocated() == 0);
}

TEST_CASE("value: use_count tells the sole holder; detach/adopt/share keep the count") {
  ScopedRegion scope(8 * MiB);
  ValueRef v = ValueRef::copy_of("payload");
  CHECK(v.use_count() == 1);  // the sole holder: APPEND may grow it in place
  {
    ValueRef reader = v;  // a reply being written
    CHECK(v.use_count() == 2);
    CHECK(reader == v);
  }
  CHECK(v.use_count() == 1);

  ValueRef copy = v;
  Value* raw = copy.detach();  // handed to a type-erased holder (resp::Keepalive)
  CHECK_FALSE(copy);
  CHECK(v.use_count() == 2);
  ValueRef shared = ValueRef::share(raw);  // the command layer takes a reference of its own
  CHECK(v.use_count() == 3);
  ValueRef::release_detached(raw);  // the holder lets go
  CHECK(v.use_count() == 2);
  shared.reset();
  CHECK(v.use_count() == 1);
  ValueRef back = ValueRef::adopt(ValueRef(v).detach());
  CHECK(v.use_count() == 2);
  back.reset();
  ValueRef::release_detached(nullptr);  // ignored
  v.reset();
  CHECK(scope.allocated() == 0);
}

TEST_CASE("value: references copied and dropped on many threads, freed once, on any thread") {
  ScopedRegion scope(64 * MiB);
  ValueRef v = ValueRef::copy_of(std::string(100000, 'v'));
  REQUIRE(v);
  constexpr int kThreads = 4, kRounds = 100000;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<ValueRef> held;
      for (int i = 0; i < kRounds; ++i) {
        held.push_back(v);  // copy: increment
        if (held.size() == 8) {
          if (held.back()->view()[99999] != 'v') mismatches.fetch_add(1);
          held.clear();     // drop: decrement
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(mismatches.load() == 0);
  CHECK(v.use_count() == 1);

  // Values made on one thread, read and released on others (as a reply written after a DEL).
  std::mutex mu;
  std::deque<ValueRef> queue;
  std::atomic<bool> done{false};
  std::atomic<size_t> checked{0};
  std::vector<std::thread> consumers;
  for (int t = 0; t < 2; ++t) {
    consumers.emplace_back([&] {
      for (;;) {
        ValueRef got;
        {
          std::lock_guard lock(mu);
          if (!queue.empty()) {
            got = std::move(queue.front());
            queue.pop_front();
          }
        }
        if (!got) {
          if (done.load()) return;
          std::this_thread::yield();
          continue;
        }
        const std::string_view s = got->view();
        if (!s.empty() && s.front() == s.back()) checked.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 20000; ++i) {
    ValueRef p = ValueRef::copy_of(std::string(1 + i % 3000, static_cast<char>('a' + i % 26)));
    REQUIRE(p);
    ValueRef keep_a_moment = p;  // two references, the last one dropped on a consumer
    std::lock_guard lock(mu);
    queue.push_back(std::move(p));
  }
  done = true;
  for (auto& t : consumers) t.join();
  CHECK(checked.load() == 20000);
  v.reset();
  CHECK(scope.allocated() == 0);
}

TEST_CASE("value: a full region makes allocate() return null, and recovers") {
  ScopedRegion scope(8 * MiB);
  std::vector<ValueRef> big;
  for (;;) {
    ValueRef v = ValueRef::allocate(1 * MiB);
    if (!v) break;
    big.push_back(std::move(v));
    REQUIRE(big.size() <= 8);
  }
  CHECK(big.size() == 8);  // 8 MiB of region, exactly 1 MiB a value (header on the heap)
  CHECK_FALSE(ValueRef::copy_of(std::string(2 * MiB, 'x')));
  CHECK_FALSE(ValueRef::allocate(ValueRef::kMaxSize + 1));
  CHECK_FALSE(ValueRef::allocate(100, ValueRef::kMaxSize + 1));

  // Small values fill what one freed big value left, then fail too.
  big.pop_back();
  std::vector<ValueRef> small;
  for (;;) {
    ValueRef v = ValueRef::copy_of(std::string(100, 's'));
    if (!v) break;
    small.push_back(std::move(v));
    REQUIRE(small.size() < 100000);
  }
  CHECK(!small.empty());
  for (const auto& v : small) CHECK(v->view() == std::string(100, 's'));

  // Freed space serves new values again.
  big.pop_back();
  ValueRef again = ValueRef::allocate(1 * MiB);
  CHECK(again);
  again.reset();
  big.clear();
  small.clear();
  CHECK(scope.allocated() == 0);
  CHECK(ValueRef::allocate(4 * MiB));
}

TEST_CASE("value: the default region serves code that never started the memory tier") {
  // The process region (created on first use here) outlives every test's scoped region.
  ValueRef v = ValueRef::copy_of("x");
  REQUIRE(v);
  CHECK(MemoryTier::region().contains(v->data(), v->size()));
  const tiering::MemoryFigures f = MemoryTier::figures();
  CHECK(f.region.allocated() >= v->allocated());
  CHECK(f.used() == f.heap + f.region.allocated());
}

TEST_CASE("value: >= 90% of the region holds value bytes for values of 4 KiB, 1 MiB, 32 MiB") {
  // The utilisation goal, measured on values (header included), not raw blocks.
  ScopedRegion scope(1024 * MiB);
  for (size_t size : {4 * KiB, 1 * MiB, 32 * MiB, 4 * KiB}) {
    std::vector<ValueRef> values;
    for (;;) {
      ValueRef v = ValueRef::allocate(size);
      if (!v) break;
      values.push_back(std::move(v));
    }
    const double util = static_cast<double>(values.size() * size) / (1024.0 * MiB);
    MESSAGE("values of " << size << " bytes: " << values.size() << ", utilisation "
                         << util * 100 << "%");
    CHECK(util >= 0.90);
  }
  CHECK(scope.allocated() == 0);
}
