// Unit tests of tiering::SsdTier on a real keyspace and store (no server): a demoted value
// leaves memory only after its write and only if unchanged and unpinned; overwrites, deletes,
// deadline changes and FLUSHALL reach the store in order; loads promote (or not, with
// promote_after); recovery rebuilds cold entries.
#include <doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>

#include "tiering/ssd_tier.h"
#include "tests/unit/ssd_test_util.h"

using namespace tiering;

using ssd_test::read_value;
using ssd_test::span_of;
using ssd_test::demote;
using ssd_test::TempDir;

namespace {


std::unique_ptr<SsdTier> open_tier(Keyspace& ks, const std::string& dir, uint32_t promote = 1) {
  SsdTierOptions o;
  o.store.path = dir + "/db";
  o.store.write_buffer_size = 4 << 20;
  o.promote_after = promote;
  SsdStatus st;
  auto tier = SsdTier::open(ks, o, &st);
  INFO(st.message);
  REQUIRE(tier != nullptr);
  return tier;
}

std::string bytes(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

void put(Keyspace& ks, const std::string& key, const std::string& value, int64_t exp = 0) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  s.upsert(key, ValueRef::copy_of(value), exp, now_ms());
}

// The entry's flags and whether its value is in memory.
std::pair<uint8_t, bool> state(Keyspace& ks, const std::string& key) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  Shard::Item* item = s.find(key, now_ms());
  REQUIRE(item != nullptr);
  return {static_cast<uint8_t>(item->second.flags & kEntrySsdFlags),
          static_cast<bool>(item->second.value)};
}

SsdTier::Loaded load(SsdTier& tier, const std::string& key) {
  return tier.load(key, now_ms(), [](size_t n) { return ValueRef::allocate(n); });
}

void settle(SsdTier& tier) { tier.wait_pending(0, 10'000); }

}  // namespace

TEST_CASE("a demoted value leaves memory after its write and a load brings it back") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path);
  tier->start();
  const std::string v = bytes(100 << 10, 'a');
  put(ks, "k", v);
  CHECK(demote(*tier, ks, "k") >= v.size());
  settle(*tier);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{kEntrySsd | kEntryCold, false});
  CHECK(tier->cold_keys() == 1);
  CHECK(tier->store().live_records() == 1);
  CHECK(tier->stats().demotions == 1);

  std::vector<ValueRef> pins;
  CHECK(tier->prepare("k", now_ms(), pins));
  CHECK(pins.empty());
  SsdTier::Loaded l = load(*tier, "k");
  REQUIRE(l.status.ok());
  REQUIRE(l.pin);
  CHECK(l.pin->view() == v);
  CHECK_FALSE(l.transient);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{kEntrySsd, true});  // memory+ssd
  CHECK(tier->cold_keys() == 0);
  l.pin.reset();
  // Its SSD copy is written: it leaves memory again at once, without a write.
  const uint64_t batches = tier->stats().batches;
  CHECK(demote(*tier, ks, "k") > 0);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{kEntrySsd | kEntryCold, false});
  CHECK(tier->stats().batches == batches);
  CHECK(tier->stats().free_drops == 1);
}

TEST_CASE("a value overwritten while queued stays in memory and its record is removed") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path);
  ks.add_observer(tier.get());  // the writer starts later: both ops meet in one batch
  put(ks, "k", bytes(50 << 10, 'a'));
  CHECK(demote(*tier, ks, "k") > 0);
  SsdTier::take_barrier();
  put(ks, "k", "new");  // supersedes the queued put
  const uint64_t ticket = SsdTier::take_barrier();
  CHECK(ticket > 0);
  tier->start();
  tier->wait_processed(ticket);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{0, true});
  CHECK(tier->store().live_records() == 0);
  CHECK(tier->stats().demotions == 0);
  CHECK(tier->pending_bytes() == 0);
}

TEST_CASE("a pinned value stays in both tiers after its write") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path);
  tier->start();
  put(ks, "k", bytes(10 << 10, 'p'));
  std::vector<ValueRef> pins;
  CHECK_FALSE(tier->prepare("k", now_ms(), pins));  // in memory: pinned, nothing to load
  REQUIRE(pins.size() == 1);
  CHECK(demote(*tier, ks, "k") > 0);
  settle(*tier);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{kEntrySsd, true});
  CHECK(demote(*tier, ks, "k") == 0);  // still pinned: refused
  pins.clear();
  CHECK(demote(*tier, ks, "k") > 0);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{kEntrySsd | kEntryCold, false});
}

TEST_CASE("DEL, EXPIRE and FLUSHALL of cold keys reach the store before their ticket") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path);
  tier->start();
  for (const char* k : {"a", "b", "c", "d"}) {
    put(ks, k, bytes(8 << 10, k[0]));
    demote(*tier, ks, k);
  }
  settle(*tier);
  SsdTier::take_barrier();
  REQUIRE(tier->store().live_records() == 4);
  {
    Shard& s = ks.shard_of("a");
    std::lock_guard lock(s.mu);
    s.erase(s.find("a", now_ms()));
  }
  uint64_t t = SsdTier::take_barrier();
  REQUIRE(t > 0);
  tier->wait_processed(t);
  CHECK(tier->store().live_records() == 3);
  CHECK(tier->cold_keys() == 3);

  const int64_t deadline = now_ms() + 3'600'000;
  {
    Shard& s = ks.shard_of("b");
    std::lock_guard lock(s.mu);
    s.set_expire(s.find("b", now_ms()), deadline);
  }
  t = SsdTier::take_barrier();
  REQUIRE(t > 0);
  tier->wait_processed(t);
  int64_t seen = 0;
  REQUIRE(tier->store().scan(0, [&](const SsdRecordInfo& r) {
    if (r.key == "b") seen = r.expire_ms;
    return true;
  }).ok());
  CHECK(seen == deadline);

  ks.flush(false);
  t = SsdTier::take_barrier();
  REQUIRE(t > 0);
  tier->wait_processed(t);
  CHECK(tier->store().live_records() == 0);
  CHECK(tier->cold_keys() == 0);
}

TEST_CASE("promote_after 2: the first read is transient, the second promotes") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path, 2);
  tier->start();
  const std::string v = bytes(20 << 10, 't');
  put(ks, "k", v);
  demote(*tier, ks, "k");
  settle(*tier);
  SsdTier::Loaded l = load(*tier, "k");
  REQUIRE(l.pin);
  CHECK(l.transient);
  CHECK(l.pin->view() == v);
  tier->release("k", l.pin);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{kEntrySsd | kEntryCold, false});
  l = load(*tier, "k");
  CHECK_FALSE(l.transient);
  CHECK(state(ks, "k") == std::pair<uint8_t, bool>{kEntrySsd, true});
  CHECK(tier->stats().reads == 2);
  CHECK(tier->stats().promotions == 1);
}

TEST_CASE("recovery rebuilds cold entries with their deadlines and skips expired ones") {
  TempDir dir;
  const int64_t later = now_ms() + 3'600'000;
  {
    Keyspace ks(8);
    auto tier = open_tier(ks, dir.path);
    tier->start();
    put(ks, "keep", bytes(30 << 10, 'k'), later);
    put(ks, "gone", bytes(30 << 10, 'g'), now_ms() + 200);
    put(ks, "memory-only", "x");
    demote(*tier, ks, "keep");
    demote(*tier, ks, "gone");
    settle(*tier);
  }
  usleep(300'000);
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path);
  CHECK(tier->recover(now_ms()) == 1);
  tier->start();
  CHECK(ks.size() == 1);
  CHECK(state(ks, "keep") == std::pair<uint8_t, bool>{kEntrySsd | kEntryCold, false});
  {
    Shard& s = ks.shard_of("keep");
    std::lock_guard lock(s.mu);
    CHECK(s.find("keep", now_ms())->second.expire_ms == later);
  }
  SsdTier::Loaded l = load(*tier, "keep");
  REQUIRE(l.pin);
  CHECK(l.pin->view() == bytes(30 << 10, 'k'));
  CHECK(tier->store().live_records() == 1);  // the expired record was swept
}

TEST_CASE("demote_all past its time limit writes what it can, drops the rest and counts both") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path);
  tier->start();
  constexpr int kKeys = 160;
  const std::string v = bytes(1 << 20, 'q');
  for (int i = 0; i < kKeys; ++i) put(ks, "k" + std::to_string(i), v);
  const auto t0 = std::chrono::steady_clock::now();
  SsdTier::ShutdownFlush r = tier->demote_all(/*limit_ms=*/1);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(r.timed_out);
  CHECK(r.status.ok());
  CHECK(r.dropped_keys > 0);
  CHECK(r.kept_keys + r.dropped_keys == kKeys);
  CHECK(r.kept_bytes + r.dropped_bytes == uint64_t{kKeys} * v.size());
  CHECK(tier->store().live_records() == r.kept_keys);
  CHECK(tier->pending_bytes() == 0);
  // The dropped ones stay in memory with no SSD flag (what a restart without them loses).
  SsdTier::ShutdownFlush left = tier->memory_only(now_ms());
  CHECK(left.dropped_keys == r.dropped_keys);
  tier->stop();
}

TEST_CASE("demote_all within its time limit keeps every memory value") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path);
  tier->start();
  for (int i = 0; i < 50; ++i) put(ks, "k" + std::to_string(i), bytes(10 << 10, 'a' + i % 20));
  put(ks, "gone", bytes(100, 'g'), now_ms() - 1);  // expired: neither kept nor dropped
  SsdTier::ShutdownFlush r = tier->demote_all(60'000);
  CHECK_FALSE(r.timed_out);
  CHECK(r.status.ok());
  CHECK(r.kept_keys == 50);
  CHECK(r.kept_bytes == 50u * (10 << 10));
  CHECK(r.dropped_keys == 0);
  CHECK(tier->memory_only(now_ms()).dropped_keys == 0);
  CHECK(read_value(tier->store(), "k7") == bytes(10 << 10, 'a' + 7));
  tier->stop();
}

// ---- admission (tiering.ssd.admission; tiering/admission.h) ----

namespace {

std::unique_ptr<SsdTier> open_selective(Keyspace& ks, const std::string& dir, uint64_t rate) {
  SsdTierOptions o;
  o.store.path = dir + "/db";
  o.store.write_buffer_size = 4 << 20;
  o.admission = Admission::kReuse;
  o.max_write_rate = rate;
  SsdStatus st;
  auto tier = SsdTier::open(ks, o, &st);
  INFO(st.message);
  REQUIRE(tier != nullptr);
  return tier;
}

void read_once(Keyspace& ks, const std::string& key) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  REQUIRE(s.lookup(key, now_ms()) != nullptr);
}

}  // namespace

TEST_CASE("admission: past the write budget, read values are admitted and the rest refused") {
  TempDir dir;
  Keyspace ks(8);
  // 4 MB/s: a 4 MiB bucket. The writer is not started: nothing leaves the queue.
  auto tier = open_selective(ks, dir.path, 4 << 20);
  CHECK(tier->selective());
  const std::string v = bytes(256 << 10, 'r');
  for (int i = 0; i < 32; ++i) put(ks, "u" + std::to_string(i), v);
  for (int i = 0; i < 8; ++i) {
    put(ks, "r" + std::to_string(i), v);
    read_once(ks, "r" + std::to_string(i));
  }
  // A burst of 8 MiB of never-read victims: a run of 3/4 of the bucket goes, the rest is
  // refused (flags untouched: the evictor evicts them).
  int admitted = 0;
  for (int i = 0; i < 32; ++i) {
    const std::string k = "u" + std::to_string(i);
    if (demote(*tier, ks, k) > 0) {
      ++admitted;
      CHECK(state(ks, k) == std::pair<uint8_t, bool>{kEntrySsd | kEntryDemoting, true});
    } else {
      CHECK(state(ks, k) == std::pair<uint8_t, bool>{0, true});
    }
  }
  CHECK(admitted >= 11);  // 3/4 of the bucket (a value's block is a little over 256 KiB)...
  CHECK(admitted <= 13);  // ... and what refilled meanwhile
  // The read ones still find the bottom quarter of the budget, where no never-read value goes.
  const uint64_t left = tier->admission().tokens();
  CHECK(left >= (1 << 20));
  int read_admitted = 0;
  for (int i = 0; i < 8; ++i) read_admitted += demote(*tier, ks, "r" + std::to_string(i)) > 0;
  CHECK(read_admitted >= 4);
  CHECK(tier->stats().admitted == static_cast<uint64_t>(admitted + read_admitted));
  CHECK(tier->stats().rejected == static_cast<uint64_t>(40 - admitted - read_admitted));
  CHECK(tier->stats().rejected_bytes >= (40 - admitted - read_admitted) * v.size());
  CHECK(tier->admission_state(now_ms()) == "rejecting");
  // A new value is not "read": writing a read key clears the sign.
  put(ks, "r0", v);
  Shard& s = ks.shard_of("r0");
  std::lock_guard lock(s.mu);
  CHECK((s.find("r0", now_ms())->second.flags & kEntryRead) == 0);
}

TEST_CASE("admission: the evictor evicts what the tier refuses and never waits for the disk") {
  TempDir dir;
  Keyspace ks(8);
  auto tier = open_selective(ks, dir.path, 4 << 20);
  const std::string v = bytes(256 << 10, 'e');
  for (int i = 0; i < 64; ++i) put(ks, "k" + std::to_string(i), v);
  Evictor ev(ks, [] { return uint64_t{1} << 40; });  // always over: evict all it can
  EvictionOptions o;
  o.policy = EvictionPolicy::kAllkeysLru;
  o.maxmemory = uint64_t{1} << 30;
  ev.set_options(o);
  ev.set_demoter(tier.get());
  // Everything must go (target 0) with the writer stopped: a waiting tier would stop at its
  // queue's bound; this one queues what it admits and evicts the rest at once.
  ev.evict_to(0, now_ms());
  const uint64_t admitted = tier->stats().admitted, rejected = tier->stats().rejected;
  CHECK(admitted > 0);
  CHECK(rejected > 0);
  CHECK(admitted + rejected == 64);
  CHECK(ev.evicted_keys() == rejected);
  CHECK(ks.size() == admitted);  // the admitted keys stay (queued for SSD)
  CHECK(tier->stats().unwritten_evictions == 0);
  CHECK(tier->pending_bytes() >= admitted * v.size());
  // Written once the writer runs: they leave memory for SSD.
  tier->start();
  settle(*tier);
  CHECK(tier->stats().demotions == admitted);
  CHECK(tier->cold_keys() == admitted);
}
