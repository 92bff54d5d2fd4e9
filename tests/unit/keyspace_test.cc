// Unit tests of tiering::Keyspace (shards, lazy and active expiry, KeyLock, SCAN and its
// guarantee across table resizes, RANDOMKEY, FLUSH, rehash steps) and tiering::glob_match.
#include <doctest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tiering/glob.h"
#include "tiering/key_lock.h"
#include "tiering/keyspace.h"
#include "tiering/memory_tier.h"

using tiering::Keyspace;
using tiering::Shard;
using tiering::ValueRef;

namespace {

constexpr int64_t kNow = 1'700'000'000'000;  // a fixed "now" in Unix ms

ValueRef val(std::string_view s) { return ValueRef::copy_of(s); }

// Bytes of live value blocks in the process's memory region.
size_t region_allocated() { return tiering::MemoryTier::region().stats().allocated(); }

// prefix + i (appending, which avoids GCC 12's false -Wrestrict on "literal" + std::string).
std::string name(std::string_view prefix, long i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

std::string str(const Shard::Item* item) { return std::string(item->second.value->view()); }

// Sets `key` in `ks` (locking its shard).
void put(Keyspace& ks, const std::string& key, std::string_view v, int64_t expire_ms = 0) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  s.upsert(key, val(v), expire_ms, kNow);
}

// The integer value of a present `key`; the caller holds its shard's lock.
long num(Keyspace& ks, std::string_view key) {
  return std::stol(std::string(ks.shard_of(key).find(key, kNow)->second.value->view()));
}

// 1000 keys of 1000 bytes, every other one with a TTL.
void fill(Keyspace& ks) {
  for (int i = 0; i < 1000; ++i)
    put(ks, name("k", i), std::string(1000, 'x'), i % 2 ? kNow + 1000 : 0);
}

}  // namespace

TEST_CASE("shard: upsert, find, erase") {
  Shard s;
  std::lock_guard lock(s.mu);
  CHECK(s.find("a", kNow) == nullptr);
  Shard::Item* a = s.upsert("a", val("1"), 0, kNow);
  CHECK(a->first == "a");
  CHECK(str(a) == "1");
  CHECK(a->second.access == tiering::lru_clock(kNow));
  CHECK(s.upsert("a", val("2"), 0, kNow) == a);  // replace keeps the node
  CHECK(str(s.find("a", kNow)) == "2");
  CHECK(s.size() == 1);
  s.upsert("b", val("3"), kNow + 1000, kNow);
  CHECK(s.volatile_size() == 1);
  CHECK(s.erase("b", kNow));
  CHECK_FALSE(s.erase("b", kNow));
  CHECK(s.volatile_size() == 0);
  s.erase(s.find("a", kNow));
  CHECK(s.size() == 0);
  CHECK(s.hits == 0);
  CHECK(s.misses == 0);  // find() counts nothing
}

TEST_CASE("shard: leases are per holder, extend, expire, and end with the key") {
  Shard s;
  std::lock_guard lock(s.mu);
  Shard::Item* a = s.upsert("a", val("1"), 0, kNow);
  CHECK_FALSE(s.leased(a, kNow));
  s.lease(a, /*holder=*/1, kNow + 100);
  s.lease(a, /*holder=*/2, kNow + 50);
  s.lease(a, /*holder=*/2, kNow + 10);  // never shortens holder 2's lease
  CHECK(s.leased(a, kNow));
  CHECK(s.lease_count(kNow) == 1);
  CHECK(s.unlease(a, 1, kNow));         // holder 1 ends its own lease ...
  CHECK_FALSE(s.unlease(a, 1, kNow));   // ... once
  CHECK(s.leased(a, kNow + 49));        // ... and holder 2's still holds
  CHECK_FALSE(s.leased(a, kNow + 50));  // until its deadline
  CHECK_FALSE(s.unlease(a, 2, kNow + 60));  // an expired lease ends without counting
  CHECK(s.lease_count(kNow) == 0);
  // Pruning forgets expired leases; erasing the key forgets live ones.
  s.lease(a, 3, kNow + 10);
  s.prune_leases(kNow + 5);
  CHECK(s.leased(a, kNow + 5));
  s.prune_leases(kNow + 10);
  CHECK_FALSE(s.leased(a, kNow));
  CHECK(s.lease_count(kNow) == 0);
  s.lease(a, 4, kNow + 1000);
  s.erase(a);
  Shard::Item* again = s.upsert("a", val("2"), 0, kNow);
  CHECK_FALSE(s.leased(again, kNow));
  CHECK(s.lease_count(kNow) == 0);
}

TEST_CASE("shard: lookup counts hits and touches, peek counts without touching") {
  Shard s;
  std::lock_guard lock(s.mu);
  s.upsert("k", val("v"), 0, kNow);
  CHECK(s.lookup("k", kNow + 5000) != nullptr);
  CHECK(s.lookup("nope", kNow) == nullptr);
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(s.find("k", kNow)->second.access == tiering::lru_clock(kNow + 5000));
  CHECK(s.peek("k", kNow + 9000) != nullptr);
  CHECK(s.peek("nope", kNow) == nullptr);
  CHECK(s.hits == 2);
  CHECK(s.misses == 2);
  CHECK(s.find("k", kNow)->second.access == tiering::lru_clock(kNow + 5000));  // peek: unchanged
}

TEST_CASE("shard: lazy expiry removes a key and counts it") {
  Shard s;
  std::lock_guard lock(s.mu);
  s.upsert("k", val("v"), kNow + 100, kNow);
  CHECK(s.find("k", kNow + 99) != nullptr);
  CHECK(s.expired == 0);
  CHECK(s.find("k", kNow + 100) == nullptr);  // due exactly at the deadline
  CHECK(s.expired == 1);
  CHECK(s.size() == 0);
  CHECK(s.volatile_size() == 0);
  s.upsert("k", val("v"), kNow + 100, kNow);
  CHECK(s.lookup("k", kNow + 200) == nullptr);
  CHECK(s.expired == 2);
  CHECK(s.misses == 1);
  s.upsert("k", val("v"), kNow + 100, kNow);
  CHECK_FALSE(s.erase("k", kNow + 200));  // an expired key counts as absent
  CHECK(s.expired == 3);
}

TEST_CASE("shard: expire_due removes exactly the due keys, oldest first, within budget") {
  Shard s;
  std::lock_guard lock(s.mu);
  // Deadlines kNow+1 .. kNow+100, inserted in a shuffled order, and 10 keys without a TTL.
  std::vector<int> order(100);
  for (int i = 0; i < 100; ++i) order[i] = i + 1;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (int i : order) s.upsert(name("v", i), val("x"), kNow + i, kNow);
  for (int i = 0; i < 10; ++i) s.upsert(name("p", i), val("x"), 0, kNow);
  CHECK(s.volatile_size() == 100);

  CHECK(s.expire_due(kNow + 50, 20) == 20);
  for (int i = 1; i <= 100; ++i)
    CHECK((s.map().count(name("v", i)) == 0) == (i <= 20));
  CHECK(s.expire_due(kNow + 50, 1000) == 30);
  CHECK(s.expire_due(kNow + 50, 1000) == 0);
  for (int i = 1; i <= 100; ++i)
    CHECK((s.map().count(name("v", i)) == 0) == (i <= 50));
  CHECK(s.size() == 60);
  CHECK(s.volatile_size() == 50);
  CHECK(s.expired == 50);
  CHECK(s.expire_due(kNow + 1'000'000, 1000) == 50);
  CHECK(s.size() == 10);  // keys without a TTL never expire
}

TEST_CASE("shard: set_expire persists and changes a deadline") {
  Shard s;
  std::lock_guard lock(s.mu);
  Shard::Item* k = s.upsert("k", val("v"), kNow + 100, kNow);
  s.set_expire(k, 0);  // PERSIST
  CHECK(k->second.expire_ms == 0);
  CHECK(s.volatile_size() == 0);
  CHECK(s.expire_due(kNow + 1000, 10) == 0);
  CHECK(s.find("k", kNow + 1000) != nullptr);

  s.set_expire(k, kNow + 100);
  s.set_expire(k, kNow + 500);  // change: the old deadline no longer applies
  CHECK(s.volatile_size() == 1);
  CHECK(s.expire_due(kNow + 200, 10) == 0);
  CHECK(s.find("k", kNow + 200) != nullptr);
  CHECK(s.expire_due(kNow + 500, 10) == 1);
  CHECK(s.size() == 0);

  // Overwriting with upsert replaces the deadline too.
  k = s.upsert("k", val("v"), kNow + 100, kNow);
  s.upsert("k", val("w"), 0, kNow);
  CHECK(s.volatile_size() == 0);
  CHECK(s.expire_due(kNow + 1000, 10) == 0);
}

TEST_CASE("keyspace: KeyLocks of many keys from several threads, MSET-like transfers, no deadlock") {
  Keyspace ks(64);
  constexpr int kKeys = 500, kThreads = 4, kOps = 10'000, kStart = 1000;
  for (int i = 0; i < kKeys; ++i) put(ks, name("acct:", i), std::to_string(kStart));

  auto worker = [&](int seed) {
    std::mt19937 rng(seed);
    std::vector<std::string> names;
    std::vector<std::string_view> keys;
    for (int op = 0; op < kOps; ++op) {
      // 2..8 keys, possibly repeated (KeyLock must lock each shard once).
      names.clear();
      size_t n = 2 + rng() % 7;
      for (size_t j = 0; j < n; ++j) names.push_back(name("acct:", rng() % kKeys));
      keys.assign(names.begin(), names.end());
      tiering::KeyLock lock(ks, keys, kNow);
      // Move one unit from the first key to each other key, as one atomic MSET.
      std::map<std::string, long> cur;
      for (const auto& k : names) cur.emplace(k, num(ks, k));
      for (size_t j = 1; j < names.size(); ++j) {
        --cur[names[0]];
        ++cur[names[j]];
      }
      for (const auto& [k, v] : cur) lock.set(k, val(std::to_string(v)), 0);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t + 1);
  // A concurrent reader: a KeyLock over every key must always see the invariant total.
  std::thread reader([&] {
    std::vector<std::string> names;
    for (int i = 0; i < kKeys; ++i) names.push_back(name("acct:", i));
    std::vector<std::string_view> keys(names.begin(), names.end());
    for (int round = 0; round < 20; ++round) {
      tiering::KeyLock lock(ks, keys, kNow);
      long total = 0;
      for (auto k : keys) total += num(ks, k);
      CHECK(total == long{kKeys} * kStart);
    }
  });
  for (auto& t : threads) t.join();
  reader.join();

  long total = 0;
  for (int i = 0; i < kKeys; ++i) {
    std::string k = name("acct:", i);
    Shard& s = ks.shard_of(k);
    std::lock_guard lock(s.mu);
    Shard::Item* item = s.find(k, kNow);
    REQUIRE(item != nullptr);
    total += std::stol(str(item));
  }
  CHECK(total == long{kKeys} * kStart);
  CHECK(ks.size() == kKeys);
}

TEST_CASE("keyspace: scan returns every key exactly once over a static keyspace") {
  Keyspace ks;
  constexpr int kKeys = 10'000;
  for (int i = 0; i < kKeys; ++i) put(ks, name("key:", i), "v");
  put(ks, "gone", "v", kNow - 1);  // expired, not yet removed: never returned
  for (size_t count : {1u, 7u, 10u, 100u, 1000u, 100'000u}) {
    CAPTURE(count);
    std::map<std::string, int> seen;
    uint64_t cursor = 0;
    size_t calls = 0;
    do {
      cursor = ks.scan(cursor, count, kNow, [&](const std::string& k, const tiering::Entry&) {
        ++seen[k];
      });
      ++calls;
    } while (cursor != 0 && calls < 1'000'000);
    CHECK(cursor == 0);
    CHECK(seen.size() == kKeys);
    CHECK(seen.count("gone") == 0);
    int dups = 0;
    for (const auto& [k, n] : seen) dups += n != 1;
    CHECK(dups == 0);
  }
}

// Redis's guarantee through Keyspace::scan: a key present for the whole scan is returned at
// least once, though the shard tables grow and shrink (and are mid-rehash) between calls.
TEST_CASE("keyspace: scan guarantee across resizes of the shard tables between calls") {
  Keyspace ks(4);
  auto del = [&](const std::string& k) {
    Shard& s = ks.shard_of(k);
    std::lock_guard lock(s.mu);
    return s.erase(k, kNow);
  };
  constexpr int kOrig = 1000;
  for (int i = 0; i < kOrig; ++i) put(ks, name("orig:", i), "v");
  std::set<std::string> seen;
  std::vector<std::string> tmp;
  long next_tmp = 0;
  size_t calls = 0, max_size = 0;
  uint64_t cursor = 0;
  do {
    cursor = ks.scan(cursor, 5, kNow, [&](const std::string& k, const tiering::Entry&) {
      seen.insert(k);
    });
    ++calls;
    const bool grow = (calls / 10) % 2 == 0;  // swing between 0 and ~20000 churn keys
    for (int i = 0; i < 2000; ++i) {
      if (grow) {
        tmp.push_back(name("tmp:", next_tmp++));
        put(ks, tmp.back(), "v");
      } else if (!tmp.empty()) {
        CHECK(del(tmp.back()));
        tmp.pop_back();
      }
    }
    max_size = std::max(max_size, tmp.size());
  } while (cursor != 0 && calls < 1'000'000);
  CHECK(cursor == 0);
  int missed = 0;
  for (int i = 0; i < kOrig; ++i) missed += seen.count(name("orig:", i)) == 0;
  CHECK(missed == 0);
  CHECK(calls > 20);        // several growth and shrink swings happened during the scan
  CHECK(max_size > 10'000);
}

TEST_CASE("keyspace: scan bounds its work, and completes when a shard empties mid-scan") {
  Keyspace ks(4);
  for (int i = 0; i < 4000; ++i) put(ks, name("k", i), "v");
  // COUNT 1 visits about one bucket per call.
  size_t got = 0;
  uint64_t cursor = ks.scan(0, 1, kNow, [&](const std::string&, const tiering::Entry&) { ++got; });
  CHECK(cursor != 0);
  CHECK(got >= 1);
  CHECK(got < 20);
  // Whatever shard the cursor points into, empty every shard: the scan then ends at once.
  ks.flush(false);
  got = 0;
  cursor = ks.scan(cursor, 10, kNow, [&](const std::string&, const tiering::Entry&) { ++got; });
  CHECK(cursor == 0);
  CHECK(got == 0);
  // SCAN 0 over an empty keyspace completes in one call.
  CHECK(ks.scan(0, 1, kNow, [&](const std::string&, const tiering::Entry&) { ++got; }) == 0);
}

TEST_CASE("keyspace: rehash_step finishes the shards' resizes") {
  Keyspace ks(2);
  for (int i = 0; i < 5000; ++i) put(ks, name("k", i), "v");
  size_t busy = ks.rehash_step(1);
  CHECK(busy <= 2);
  for (int i = 0; i < 100'000 && busy > 0; ++i) busy = ks.rehash_step(10);
  CHECK(busy == 0);
  for (size_t s = 0; s < ks.shard_count(); ++s) {
    std::lock_guard lock(ks.shard(s).mu);
    CHECK_FALSE(ks.shard(s).map().rehashing());
  }
  CHECK(ks.size() == 5000);
}

TEST_CASE("keyspace: random_key returns a live key, nothing when empty") {
  Keyspace ks(8);
  CHECK_FALSE(ks.random_key(kNow).has_value());
  for (int i = 0; i < 50; ++i) put(ks, name("dead:", i), "v", kNow - 1);
  CHECK_FALSE(ks.random_key(kNow).has_value());  // only expired keys
  put(ks, "alive", "v");
  for (int i = 0; i < 100; ++i) {
    auto k = ks.random_key(kNow);
    REQUIRE(k.has_value());
    CHECK(*k == "alive");
  }
  for (int i = 0; i < 100; ++i) put(ks, name("k", i), "v");
  std::set<std::string> picked;
  for (int i = 0; i < 500; ++i) {
    auto k = ks.random_key(kNow);
    REQUIRE(k.has_value());
    CHECK(k->rfind("dead:", 0) != 0);
    picked.insert(*k);
  }
  CHECK(picked.size() > 10);  // not stuck on one key
}

TEST_CASE("keyspace: flush empties, sync and async") {
  Keyspace ks;
  const size_t base = region_allocated();
  fill(ks);
  CHECK(ks.size() == 1000);
  CHECK(ks.volatile_size() == 500);
  ks.flush(false);
  CHECK(ks.size() == 0);
  CHECK(ks.volatile_size() == 0);
  CHECK(region_allocated() == base);

  fill(ks);
  ks.flush(true);
  CHECK(ks.size() == 0);
  CHECK(ks.volatile_size() == 0);
  CHECK(ks.active_expire(kNow + 5000, 100) == 0);
  // The background thread frees the old tables soon.
  for (int i = 0; i < 500 && region_allocated() != base; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(region_allocated() == base);
  put(ks, "after", "v");
  CHECK(ks.size() == 1);
}

TEST_CASE("glob: Redis stringmatchlen cases") {
  using tiering::glob_match;
  CHECK(glob_match("*", ""));
  CHECK(glob_match("*", "anything"));
  CHECK(glob_match("**", "x"));
  CHECK(glob_match("h*o", "hello"));
  CHECK(glob_match("h*o", "ho"));
  CHECK_FALSE(glob_match("h*o", "hola"));
  CHECK(glob_match("*llo", "hello"));
  CHECK(glob_match("a*b*c", "aXXbYYc"));
  CHECK_FALSE(glob_match("a*b*c", "aXXcYYb"));

  CHECK(glob_match("h?llo", "hello"));
  CHECK(glob_match("h?llo", "hallo"));
  CHECK_FALSE(glob_match("h?llo", "hllo"));
  CHECK_FALSE(glob_match("?", ""));

  CHECK(glob_match("h[ae]llo", "hello"));
  CHECK(glob_match("h[ae]llo", "hallo"));
  CHECK_FALSE(glob_match("h[ae]llo", "hillo"));
  CHECK(glob_match("[a-c]", "b"));
  CHECK(glob_match("[a-c]", "a"));
  CHECK(glob_match("[a-c]", "c"));
  CHECK_FALSE(glob_match("[a-c]", "d"));
  CHECK(glob_match("[c-a]", "b"));  // reversed range
  CHECK(glob_match("h[^e]llo", "hallo"));
  CHECK_FALSE(glob_match("h[^e]llo", "hello"));
  CHECK_FALSE(glob_match("[^a]", "a"));
  CHECK(glob_match("[^a]", "b"));
  CHECK_FALSE(glob_match("[abc]", ""));
  CHECK(glob_match("[\\]]", "]"));

  CHECK(glob_match("\\*", "*"));
  CHECK_FALSE(glob_match("\\*", "a"));
  CHECK(glob_match("a\\?b", "a?b"));
  CHECK_FALSE(glob_match("a\\?b", "axb"));
  CHECK(glob_match("\\[a]", "[a]"));
  CHECK(glob_match("foo\\", "foo\\"));  // a trailing backslash matches itself

  CHECK(glob_match("HeLLo", "hello", true));
  CHECK_FALSE(glob_match("HeLLo", "hello"));
  CHECK(glob_match("[A-C]x", "bX", true));
  CHECK(glob_match("h?L*", "HELLO", true));

  std::string bin("a\0b", 3);  // binary-safe
  CHECK(glob_match("a?b", bin));
  CHECK(glob_match(std::string_view("a\0*", 3), bin));
  CHECK_FALSE(glob_match(std::string_view("a\0c", 3), bin));
  CHECK(glob_match(std::string_view("a\0b", 3), bin));
}
