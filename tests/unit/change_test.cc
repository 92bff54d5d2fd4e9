// Unit tests of the keyspace's write path (tiering/change.h, key_lock.h) and its slot index:
// every kind of change reaches a registered observer exactly once, in order, with the key's slot,
// the absolute deadline and the right cause; per-slot counts and iteration stay right under
// inserts, deletes, expiry, eviction, demotion and promotion. Runs against a real SSD tier (in
// the ssd_test executable) so that demotion and promotion are the real ones.
#include <doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tiering/eviction.h"
#include "tiering/key_lock.h"
#include "tiering/ssd_tier.h"
#include "tests/unit/ssd_test_util.h"

using namespace tiering;

using ssd_test::read_value;
using ssd_test::span_of;
using ssd_test::TempDir;

namespace {

// A slot function with a visible rule, so the tests can pick keys of one slot: the slot is the
// number after the last '@' (mod 16384), else 0. ("a@5" is in slot 5.)
uint16_t test_slot(std::string_view key) {
  const size_t at = key.rfind('@');
  if (at == std::string_view::npos) return 0;
  return static_cast<uint16_t>(std::stoul(std::string(key.substr(at + 1))) % kSlotCount);
}

struct Seen {
  ChangeKind kind;
  ChangeCause cause;
  std::string key;
  uint16_t slot;
  uint64_t seq;
  size_t shard;
  std::string value;  // kSet, kPromoted: the bytes
  int64_t expire_ms;
};

// Records every change (observers run under shard locks: a mutex of its own for the list).
struct Recorder : KeyspaceObserver {
  std::mutex mu;
  std::vector<Seen> seen;
  int flushes = 0;
  void on_change(Shard& shard, const Change& c) override {
    std::lock_guard lock(mu);
    seen.push_back({c.kind, c.cause, std::string(c.key), c.slot, c.seq, shard.index(),
                    c.value != nullptr && *c.value ? std::string((*c.value)->view()) : "",
                    c.expire_ms});
  }
  void on_flush() override { ++flushes; }
  // The changes since the last take().
  std::vector<Seen> take() {
    std::lock_guard lock(mu);
    return std::exchange(seen, {});
  }
};

ValueRef val(std::string_view s) { return ValueRef::copy_of(s); }

// Exactly one change, checked.
Seen one(Recorder& r) {
  std::vector<Seen> s = r.take();
  REQUIRE(s.size() == 1);
  return s[0];
}


}  // namespace

TEST_CASE("write path: every change of a command reaches the observer once, with slot and deadline") {
  Keyspace ks(8, &test_slot);
  Recorder rec;
  ks.add_observer(&rec);
  ks.add_observer(&rec);  // once only
  const int64_t now = now_ms();

  {  // insert, with a relative TTL turned absolute by the caller
    KeyLock lock(ks, "a@5", now);
    lock.set("a@5", val("v1"), now + 10'000);
  }
  Seen s = one(rec);
  CHECK(s.kind == ChangeKind::kSet);
  CHECK(s.cause == ChangeCause::kCommand);
  CHECK(s.key == "a@5");
  CHECK(s.slot == 5);
  CHECK(s.shard == ks.shard_of_slot(5));
  CHECK(s.value == "v1");
  CHECK(s.expire_ms == now + 10'000);
  const uint64_t seq0 = s.seq;

  {  // overwrite without a TTL: the deadline goes
    KeyLock lock(ks, "a@5", now);
    lock.set("a@5", val("v2"), 0);
  }
  s = one(rec);
  CHECK(s.kind == ChangeKind::kSet);
  CHECK(s.value == "v2");
  CHECK(s.expire_ms == 0);
  CHECK(s.seq == seq0 + 1);  // per-shard sequence

  {  // a deadline, then the same deadline again (no change), then persist
    KeyLock lock(ks, "a@5", now);
    const KeyLock::Item* item = lock.find("a@5");
    lock.set_expire(item, now + 5'000);
    lock.set_expire(item, now + 5'000);
    lock.set_expire(item, 0);
  }
  std::vector<Seen> v = rec.take();
  REQUIRE(v.size() == 2);
  CHECK(v[0].kind == ChangeKind::kExpire);
  CHECK(v[0].expire_ms == now + 5'000);
  CHECK(v[1].kind == ChangeKind::kExpire);
  CHECK(v[1].expire_ms == 0);

  {  // replace the value keeping the deadline (INCR), then a change in place (APPEND)
    KeyLock lock(ks, "a@5", now);
    const KeyLock::Item* item = lock.find("a@5");
    lock.set_expire(item, now + 7'000);
    lock.set_value(item, ValueRef::allocate(2, 64));
    std::memcpy(item->second.value->data(), "10", 2);
    lock.modified(item);
    Value* bytes = lock.writable_in_place(item, 3);
    REQUIRE(bytes != nullptr);  // the sole reference, with room
    bytes->data()[2] = '1';
    bytes->resize(3);
    lock.modified(item);
  }
  v = rec.take();
  REQUIRE(v.size() == 4);
  CHECK(v[1].kind == ChangeKind::kSet);
  CHECK(v[1].expire_ms == now + 7'000);
  CHECK(v[3].kind == ChangeKind::kSet);
  CHECK(v[3].value == "101");  // the bytes after the change
  CHECK(v[3].expire_ms == now + 7'000);

  {  // rename: a delete of the source, then a set of the destination with its deadline
    KeyLock lock(ks, std::vector<std::string_view>{"a@5", "b@9"}, now);
    lock.rename(lock.find("a@5"), "b@9");
  }
  v = rec.take();
  REQUIRE(v.size() == 2);
  CHECK(v[0].kind == ChangeKind::kDelete);
  CHECK(v[0].key == "a@5");
  CHECK(v[0].slot == 5);
  CHECK(v[1].kind == ChangeKind::kSet);
  CHECK(v[1].key == "b@9");
  CHECK(v[1].slot == 9);
  CHECK(v[1].value == "101");
  CHECK(v[1].expire_ms == now + 7'000);

  {  // delete
    KeyLock lock(ks, "b@9", now);
    lock.remove(lock.find("b@9"));
  }
  s = one(rec);
  CHECK(s.kind == ChangeKind::kDelete);
  CHECK(s.cause == ChangeCause::kCommand);
  CHECK(s.key == "b@9");

  {  // reads change nothing
    KeyLock lock(ks, "b@9", now);
    CHECK(lock.lookup("b@9") == nullptr);
    CHECK(lock.peek("b@9") == nullptr);
  }
  CHECK(rec.take().empty());

  ks.flush(false);
  CHECK(rec.flushes == 1);
  CHECK(rec.take().empty());
  ks.remove_observer(&rec);
}

TEST_CASE("write path: lazy and active expiry, and eviction, are changes with their cause") {
  Keyspace ks(4, &test_slot);
  Recorder rec;
  ks.add_observer(&rec);
  const int64_t now = now_ms();
  {
    KeyLock lock(ks, std::vector<std::string_view>{"x@1", "y@2", "z@3"}, now);
    lock.set("x@1", val("x"), now + 100);
    lock.set("y@2", val("y"), now + 100);
    lock.set("z@3", val("z"), 0);
  }
  rec.take();
  {  // lazy: a read after the deadline removes the key
    KeyLock lock(ks, "x@1", now + 200);
    CHECK(lock.find("x@1") == nullptr);
  }
  Seen s = one(rec);
  CHECK(s.kind == ChangeKind::kDelete);
  CHECK(s.cause == ChangeCause::kExpiry);
  CHECK(s.key == "x@1");
  CHECK(s.slot == 1);

  CHECK(ks.active_expire(now + 200, 100) == 1);  // active: the cron's pass
  s = one(rec);
  CHECK(s.kind == ChangeKind::kDelete);
  CHECK(s.cause == ChangeCause::kExpiry);
  CHECK(s.key == "y@2");

  // Eviction (allkeys-random: the only key goes).
  Evictor ev(ks, [] { return uint64_t{1} << 40; });
  EvictionOptions o;
  o.policy = EvictionPolicy::kAllkeysRandom;
  o.maxmemory = 1;
  ev.set_options(o);
  ev.make_room(0, false, now);  // frees what it can (the used-memory figure stays high)
  s = one(rec);
  CHECK(s.kind == ChangeKind::kDelete);
  CHECK(s.cause == ChangeCause::kEviction);
  CHECK(s.key == "z@3");
  CHECK(s.slot == 3);
  CHECK(ks.size() == 0);
}

TEST_CASE("no room is ever made under a shard lock") {
  Keyspace ks(4, &test_slot);
  Evictor ev(ks, [] { return uint64_t{1} << 40; });
  EvictionOptions o;
  o.policy = EvictionPolicy::kAllkeysRandom;
  o.maxmemory = 1;
  ev.set_options(o);
  {
    KeyLock lock(ks, "k@1", now_ms());
    lock.set("k@1", val("v"), 0);
    CHECK(ShardMutex::held_by_this_thread() == 1);
#ifdef NDEBUG
    CHECK_FALSE(ev.make_room(1, true, now_ms()));  // refuses instead of deadlocking
#endif
  }
  CHECK(ShardMutex::held_by_this_thread() == 0);
  ev.make_room(1, true, now_ms());  // with no lock held, it evicts
  CHECK(ks.size() == 0);
}

TEST_CASE("write path: demotion and promotion by the SSD tier are changes of cause kTiering") {
  TempDir dir;
  Keyspace ks(8, &test_slot);
  SsdTierOptions o;
  o.store.path = dir.path + "/db";
  o.store.write_buffer_size = 4 << 20;
  SsdStatus st;
  auto tier = SsdTier::open(ks, o, &st);
  REQUIRE(tier != nullptr);
  tier->start();
  Recorder rec;
  ks.add_observer(&rec);  // after the tier: the tier is the first observer
  const int64_t now = now_ms();
  const std::string big(64 << 10, 'q');
  {
    KeyLock lock(ks, "cold@77", now);
    lock.set("cold@77", val(big), now + 60'000);
  }
  rec.take();
  {
    Shard& shard = ks.shard_of("cold@77");
    std::lock_guard lock(shard.mu);
    CHECK(tier->demote(shard, shard.find("cold@77", now), now, true) > 0);
  }
  tier->wait_pending(0, 10'000);
  Seen s = one(rec);
  CHECK(s.kind == ChangeKind::kDemoted);
  CHECK(s.cause == ChangeCause::kTiering);
  CHECK(s.slot == 77);
  CHECK(s.expire_ms == now + 60'000);
  CHECK(ks.count_in_slot(77) == 1);  // the key stays (on SSD)

  SsdTier::Loaded l = tier->load("cold@77", now, [](size_t n) { return ValueRef::allocate(n); });
  REQUIRE(l.status.ok());
  s = one(rec);
  CHECK(s.kind == ChangeKind::kPromoted);
  CHECK(s.value == big);
  CHECK(s.expire_ms == now + 60'000);
  ks.remove_observer(&rec);
  tier->stop();
}

TEST_CASE("slot index: counts and iteration follow inserts, deletes, expiry, eviction, flush") {
  Keyspace ks(16, &test_slot);
  const int64_t now = now_ms();
  std::map<uint16_t, std::set<std::string>> model;
  auto check_all = [&](int64_t at) {
    for (uint16_t slot : {0, 1, 2, 15, 16, 17, 100, 16383}) {
      INFO("slot " << slot);
      std::vector<std::string> keys = ks.keys_in_slot(slot, 1'000'000, at);
      CHECK(std::set<std::string>(keys.begin(), keys.end()) == model[slot]);
      CHECK(ks.count_in_slot(slot) == model[slot].size());
    }
  };
  // Slots 1, 17 and 16383 share a shard with others (16 shards): a slot's list holds only its keys.
  for (int i = 0; i < 300; ++i) {
    const uint16_t slot = std::vector<uint16_t>{0, 1, 2, 15, 16, 17, 100, 16383}[i % 8];
    const std::string key = "k" + std::to_string(i) + "@" + std::to_string(slot);
    KeyLock lock(ks, key, now);
    lock.set(key, val("v"), i % 5 == 0 ? now + 1'000 : 0);
    model[slot].insert(key);
  }
  check_all(now);
  for (int i = 0; i < 300; i += 3) {  // deletes
    const uint16_t slot = std::vector<uint16_t>{0, 1, 2, 15, 16, 17, 100, 16383}[i % 8];
    const std::string key = "k" + std::to_string(i) + "@" + std::to_string(slot);
    KeyLock lock(ks, key, now);
    if (const KeyLock::Item* item = lock.find(key)) lock.remove(item);
    model[slot].erase(key);
  }
  check_all(now);
  // Expiry: keys_in_slot leaves out expired keys at once; the count drops once they are removed.
  ks.active_expire(now + 2'000, 1'000'000);
  for (int i = 0; i < 300; ++i) {
    if (i % 5 != 0) continue;
    const uint16_t slot = std::vector<uint16_t>{0, 1, 2, 15, 16, 17, 100, 16383}[i % 8];
    model[slot].erase("k" + std::to_string(i) + "@" + std::to_string(slot));
  }
  check_all(now + 2'000);
  // Eviction of everything in the way (allkeys-random, until nothing is left).
  Evictor ev(ks, [] { return uint64_t{1} << 40; });
  EvictionOptions o;
  o.policy = EvictionPolicy::kAllkeysRandom;
  o.maxmemory = 1;
  ev.set_options(o);
  for (int i = 0; i < 20; ++i) {
    const uint64_t before = ks.size();
    if (before == 0) break;
    ev.make_room(0, false, now + 2'000);
    CHECK(ks.size() < before);
  }
  for (auto& [slot, keys] : model) {
    std::erase_if(keys, [&](const std::string& k) {
      KeyLock lock(ks, k, now + 2'000);
      return lock.peek(k) == nullptr;
    });
  }
  check_all(now + 2'000);
  {
    KeyLock lock(ks, "again@100", now);
    lock.set("again@100", val("v"), 0);
  }
  ks.flush(false);
  for (auto& [slot, keys] : model) keys.clear();
  check_all(now);
  CHECK(ks.size() == 0);
}
