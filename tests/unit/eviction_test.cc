// Unit tests of tiering::Evictor: each policy picks the victims Redis's would (or better),
// watermarks, pinned keys, and the background thread.
#include <doctest.h>

#include <chrono>
#include <set>
#include <string>
#include <random>
#include <thread>

#include "tiering/eviction.h"
#include "tiering/eviction_log.h"

using namespace tiering;

namespace {

// Bytes per key: each value's block (header + bytes) is exactly one 1 KiB allocation, so the
// used-memory function below (keys x kUnit) agrees with what the evictor counts as freed.
constexpr uint64_t kUnit = 1024;

// Sets key i with access clock `access_ms` and optional deadline.
void put(Keyspace& ks, const std::string& key, int64_t access_ms, int64_t expire_ms = 0) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  Shard::Item* item =
      s.upsert(key, ValueRef::copy_of(std::string(kUnit - Value::kHeaderSize, 'v')), expire_ms,
               access_ms);
  REQUIRE(item->second.value->allocated() == kUnit);
  item->second.access = lru_clock(access_ms);
}

bool present(Keyspace& ks, const std::string& key, int64_t now) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  return s.find(key, now) != nullptr;
}

EvictionOptions opts(EvictionPolicy p, uint64_t maxmemory) {
  EvictionOptions o;
  o.policy = p;
  o.maxmemory = maxmemory;
  return o;
}

}  // namespace

TEST_CASE("allkeys-lru on a small keyspace evicts exactly the least recently used keys") {
  Keyspace ks(16);
  const int64_t now = 1'000'000'000;
  for (int i = 0; i < 100; ++i) put(ks, "k" + std::to_string(i), now - 100'000 + i * 10);
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 100 * kUnit));
  CHECK(ev.evict_to(80 * kUnit, now) == 20);
  for (int i = 0; i < 100; ++i) CHECK(present(ks, "k" + std::to_string(i), now) == (i >= 20));
  CHECK(ev.evicted_keys() == 20);
}

TEST_CASE("allkeys-lru on a large keyspace keeps a recently used hot set") {
  Keyspace ks(64);
  const int64_t now = 1'000'000'000;
  const int n = 20000;
  for (int i = 0; i < n; ++i) put(ks, "k" + std::to_string(i), now - 3'600'000 + i);
  for (int i = 0; i < n; i += 10) put(ks, "k" + std::to_string(i), now);  // hot: every 10th
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  EvictionOptions o = opts(EvictionPolicy::kAllkeysLru, n * kUnit);
  o.exact_limit = 1000;  // force sampling
  ev.set_options(o);
  ev.evict_to(n / 2 * kUnit, now);
  CHECK(ks.size() == n / 2);
  int hot_kept = 0;
  for (int i = 0; i < n; i += 10) hot_kept += present(ks, "k" + std::to_string(i), now);
  CHECK(hot_kept >= (n / 10) * 95 / 100);  // sampling with a pool keeps >= 95% of the hot set
}

TEST_CASE("volatile policies only evict keys with a TTL; volatile-ttl takes the nearest first") {
  Keyspace ks(16);
  const int64_t now = 1'000'000'000;
  for (int i = 0; i < 50; ++i) put(ks, "p" + std::to_string(i), now - 500'000);  // no TTL, old
  for (int i = 0; i < 50; ++i) put(ks, "t" + std::to_string(i), now, now + 1'000'000 + i * 1000);
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  ev.set_options(opts(EvictionPolicy::kVolatileTtl, 100 * kUnit));
  CHECK(ev.evict_to(90 * kUnit, now) == 10);
  for (int i = 0; i < 50; ++i) {
    CHECK(present(ks, "p" + std::to_string(i), now));
    CHECK(present(ks, "t" + std::to_string(i), now) == (i >= 10));
  }
  for (auto p : {EvictionPolicy::kVolatileLru, EvictionPolicy::kVolatileLfu,
                 EvictionPolicy::kVolatileRandom}) {
    ev.set_options(opts(p, 100 * kUnit));
    ev.evict_to(0, now);  // asks for everything: only the 40 keys with a TTL can go
    CHECK(ks.size() == 50);
    for (int i = 0; i < 50; ++i) CHECK(present(ks, "p" + std::to_string(i), now));
    for (int i = 0; i < 40; ++i) put(ks, "t" + std::to_string(i), now, now + 1'000'000);
  }
}

TEST_CASE("allkeys-lfu evicts the least frequently used keys") {
  Keyspace ks(16);
  const int64_t now = 1'000'000'000;
  for (int i = 0; i < 100; ++i) {
    std::string key = "k" + std::to_string(i);
    put(ks, key, now);
    Shard& s = ks.shard_of(key);
    std::lock_guard lock(s.mu);
    Shard::Item* item = s.find(key, now);
    item->second.lfu = static_cast<uint8_t>(i < 30 ? 1 : 50);
    item->second.lfu_minutes = lfu_minutes(now);
  }
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  ev.set_options(opts(EvictionPolicy::kAllkeysLfu, 100 * kUnit));
  CHECK(ev.evict_to(70 * kUnit, now) == 30);
  for (int i = 0; i < 100; ++i) CHECK(present(ks, "k" + std::to_string(i), now) == (i >= 30));
}

TEST_CASE("LFU counter: logarithmic increment and decay, as Redis") {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> r(0, 1);
  uint8_t c = kLfuInitVal;
  for (int i = 0; i < 100; ++i) c = lfu_increment(c, 10, r(rng));
  CHECK(c > kLfuInitVal);
  CHECK(c < 30);  // 100 hits with factor 10 reach only the low tens
  CHECK(lfu_increment(255, 10, 0.0) == 255);
  CHECK(lfu_increment(kLfuInitVal, 10, 0.99) == kLfuInitVal + 1);  // p = 1 at the initial value
  const int64_t now = 10 * 60'000;
  CHECK(lfu_decay(20, lfu_minutes(now), now, 1) == 20);
  CHECK(lfu_decay(20, lfu_minutes(now - 5 * 60'000), now, 1) == 15);
  CHECK(lfu_decay(3, lfu_minutes(now - 5 * 60'000), now, 1) == 0);
  CHECK(lfu_decay(20, lfu_minutes(now - 5 * 60'000), now, 0) == 20);
}

TEST_CASE("leased keys are skipped; noeviction evicts nothing") {
  Keyspace ks(16);
  const int64_t now = 1'000'000'000;
  for (int i = 0; i < 20; ++i) put(ks, "k" + std::to_string(i), now - 1000 + i);
  std::set<std::string> pins = {"k0", "k1", "k2"};
  for (auto& p : pins) {
    Shard& s = ks.shard_of(p);
    s.lease(s.find(p, now), /*holder=*/1, now + 10'000);
  }
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  ev.set_options(opts(EvictionPolicy::kNoEviction, 20 * kUnit));
  CHECK(ev.evict_to(0, now) == 0);
  CHECK_FALSE(ev.make_room(kUnit, true, now));
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 20 * kUnit));
  CHECK(ev.evict_to(0, now) == 17);
  for (auto& p : pins) CHECK(present(ks, p, now));
}

TEST_CASE("make_room evicts until a write fits, and frees at least its size after a failed allocation") {
  Keyspace ks(16);
  const int64_t now = 1'000'000'000;
  for (int i = 0; i < 10; ++i) put(ks, "k" + std::to_string(i), now - 1000 + i);
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 10 * kUnit));
  CHECK(ev.make_room(3 * kUnit, false, now));
  CHECK(ks.size() == 7);
  EvictionOptions o = opts(EvictionPolicy::kAllkeysLru, 0);  // no limit, but no room either
  ev.set_options(o);
  CHECK(ev.make_room(1, true, now));
  CHECK(ks.size() == 6);
}

TEST_CASE("after a failed allocation make_room goes on evicting, in LRU order, until the block fits in one piece") {
  // The fake region: the block fits once the three least recently used keys are gone
  // together (their ranges are neighbours), whatever else was freed.
  Keyspace ks(16);
  const int64_t now = 1'000'000'000;
  for (int i = 0; i < 40; ++i) put(ks, "k" + std::to_string(i), now - 1000 + i);
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 0));
  int looks = 0;
  ev.set_fits([&](uint64_t bytes) {
    CHECK(bytes == 2 * kUnit);
    ++looks;
    return ks.size() <= 30;  // ten keys gone: the holes they left lie together
  });
  CHECK(ev.make_room(2 * kUnit, /*allocation_failed=*/true, now));
  CHECK(ks.size() == 30);  // not 38: the two the bytes asked for left holes apart
  CHECK(looks >= 1);
  for (int i = 0; i < 40; ++i) CHECK(present(ks, "k" + std::to_string(i), now) == (i >= 10));
  // Without a failed allocation the bytes alone count.
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 30 * kUnit));
  CHECK(ev.make_room(2 * kUnit, false, now));
  CHECK(ks.size() == 28);
  // Nothing left that would make it fit: everything evictable goes, and the caller's
  // allocation decides (true: the bytes were freed).
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 0));
  ev.set_fits([](uint64_t) { return false; });
  CHECK(ev.make_room(2 * kUnit, true, now));
  CHECK(ks.size() == 0);
  CHECK_FALSE(ev.make_room(2 * kUnit, true, now));
}

TEST_CASE("the background thread evicts from the high to the low watermark") {
  Keyspace ks(16);
  const int64_t now = now_ms();
  for (int i = 0; i < 100; ++i) put(ks, "k" + std::to_string(i), now - 100'000 + i);
  Evictor ev(ks, [&] { return ks.size() * kUnit; });
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 100 * kUnit));  // 100% > 95% high
  ev.start(10);
  for (int i = 0; i < 200 && ks.size() > 90; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ev.stop();
  CHECK(ks.size() == 90);  // down to exactly the low watermark (0.90)
}

TEST_CASE("an access stamped after the evictor's clock is fresh, not 49 days idle") {
  const int64_t now = 1'000'000'000;
  CHECK(lru_idle_ms(lru_clock(now + 5), now) == 0);
  CHECK(lru_idle_ms(lru_clock(now - 5), now) == 5);
  // Across a wrap of the 32-bit clock.
  const int64_t wrap = int64_t{1} << 32;
  CHECK(lru_idle_ms(lru_clock(wrap - 10), wrap + 10) == 20);
}

TEST_CASE("every maxmemory-policy name of Redis maps to its policy and back") {
  // Redis 7.0's names, in its config table's order (config.c maxmemory_policy_enum).
  const std::pair<const char*, EvictionPolicy> redis[] = {
      {"volatile-lru", EvictionPolicy::kVolatileLru},
      {"volatile-lfu", EvictionPolicy::kVolatileLfu},
      {"volatile-random", EvictionPolicy::kVolatileRandom},
      {"volatile-ttl", EvictionPolicy::kVolatileTtl},
      {"allkeys-lru", EvictionPolicy::kAllkeysLru},
      {"allkeys-lfu", EvictionPolicy::kAllkeysLfu},
      {"allkeys-random", EvictionPolicy::kAllkeysRandom},
      {"noeviction", EvictionPolicy::kNoEviction},
  };
  const auto table = eviction_policy_names();
  REQUIRE(table.size() == std::size(redis));
  std::set<EvictionPolicy> seen;
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& [name, policy] = redis[i];
    CAPTURE(name);
    CHECK(table[i].name == name);  // same order: CONFIG SET's error lists them so
    CHECK(table[i].policy == policy);
    REQUIRE(parse_eviction_policy(name).has_value());
    CHECK(*parse_eviction_policy(name) == policy);
    CHECK(eviction_policy_name(policy) == name);
    CHECK(eviction_policy_name(*parse_eviction_policy(name)) == name);
    seen.insert(policy);
  }
  CHECK(seen.size() == std::size(redis));  // one name per policy
  // CONFIG SET reads enums case-insensitively.
  CHECK(parse_eviction_policy("ALLKEYS-LRU") == EvictionPolicy::kAllkeysLru);
  CHECK(parse_eviction_policy("NoEviction") == EvictionPolicy::kNoEviction);
  CHECK_FALSE(parse_eviction_policy("lru").has_value());
  CHECK_FALSE(parse_eviction_policy("").has_value());
  CHECK_FALSE(parse_eviction_policy("allkeys-lru ").has_value());
  CHECK(lfu_policy(EvictionPolicy::kVolatileLfu));
  CHECK(lfu_policy(EvictionPolicy::kAllkeysLfu));
  CHECK_FALSE(lfu_policy(EvictionPolicy::kAllkeysLru));
  CHECK(volatile_policy(EvictionPolicy::kVolatileTtl));
  CHECK_FALSE(volatile_policy(EvictionPolicy::kNoEviction));
}

TEST_CASE("a hidden slot's keys (a migration's import) are never evicted; the others are") {
  Keyspace ks(16);
  const int64_t now = 1'000'000'000;
  for (int i = 0; i < 100; ++i) put(ks, "k" + std::to_string(i), now - 100'000 + i * 10);
  // The 40 least recently used keys are hidden: an exact pass would pick them first.
  std::vector<bool> hidden(100);
  for (int i = 0; i < 40; ++i) ks.set_hidden(ks.slot_of("k" + std::to_string(i)), true);
  size_t unhidden = 0;
  for (int i = 0; i < 100; ++i) {
    hidden[i] = ks.hidden(ks.slot_of("k" + std::to_string(i)));
    unhidden += hidden[i] ? 0 : 1;
  }
  // Used memory counts every key, hidden ones included (size() passes them over).
  Evictor ev(ks, [&] { return ks.table_figures().keys * kUnit; });
  ev.set_options(opts(EvictionPolicy::kAllkeysLru, 100 * kUnit));
  CHECK(ev.evict_to(80 * kUnit, now) == 20);
  size_t evicted_hidden = 0, kept = 0;
  for (int i = 0; i < 100; ++i) {
    const bool there = present(ks, "k" + std::to_string(i), now);
    if (hidden[i] && !there) ++evicted_hidden;
    kept += there ? 1 : 0;
  }
  CHECK(evicted_hidden == 0);
  CHECK(kept == 80);
  // Nothing but hidden keys left to evict: eviction finds no victim (the import then ends).
  CHECK(ev.evict_to((100 - unhidden) * kUnit / 2, now) == unhidden - 20);
  for (int i = 0; i < 100; ++i)
    if (hidden[i]) CHECK(present(ks, "k" + std::to_string(i), now));
}

TEST_CASE("EvictionLog: one line when eviction starts, one when it has been quiet 10 s") {
  tiering::EvictionLog log;
  const uint64_t mb = 1 << 20;
  CHECK(log.tick(0, 0, 10 * mb, 100 * mb, "allkeys-lru").empty());  // nothing evicted
  const std::string start = log.tick(100, 5, 99 * mb, 100 * mb, "allkeys-lru");
  CHECK(start.find("eviction started") == 0);
  CHECK(start.find("maxmemory-policy=allkeys-lru") != std::string::npos);
  // Evicting on: nothing per tick.
  for (int64_t t = 200; t <= 5000; t += 100)
    CHECK(log.tick(t, 5 + static_cast<uint64_t>(t), 99 * mb, 100 * mb, "allkeys-lru").empty());
  // Quiet, but for less than 10 s.
  CHECK(log.tick(14'000, 5005, 90 * mb, 100 * mb, "allkeys-lru").empty());
  const std::string stop = log.tick(15'000, 5005, 90 * mb, 100 * mb, "allkeys-lru");
  CHECK(stop.find("eviction stopped: 5005 keys evicted in 4 s") == 0);
  CHECK(log.tick(16'000, 5005, 90 * mb, 100 * mb, "allkeys-lru").empty());  // said once
  // CONFIG RESETSTAT sets the count back: no false start, and a new episode counts afresh.
  CHECK(log.tick(17'000, 0, 90 * mb, 100 * mb, "allkeys-lru").empty());
  CHECK(log.tick(18'000, 3, 99 * mb, 100 * mb, "volatile-ttl").find("eviction started") == 0);
  CHECK(log.tick(40'000, 3, 50 * mb, 100 * mb, "volatile-ttl").find("eviction stopped: 3 keys") == 0);
}
