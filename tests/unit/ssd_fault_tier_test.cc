// Unit tests of tiering::SsdTier (its writer thread, a real keyspace and store) under injected
// RocksDB I/O errors (tests/fakes/faulty_fs.h): while writes fail the tier admits nothing and
// memory evicts as without it, its figures and log say so, and values stay right; a no-space
// error heals in process, an I/O error halts the store until a restart; a failed read is an
// error for that command and the key stays on SSD; under faults coming and going, every value
// read is right or an error. (docs/ssd-tier.md, "Capacity and failures".)
#include <doctest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/fakes/faulty_fs.h"
#include "tests/unit/ssd_fault_util.h"
#include "tests/unit/ssd_test_util.h"
#include "tiering/eviction.h"
#include "tiering/ssd_tier.h"

using namespace tiering;
using fakes::FaultyFs;
using ssd_fault::pattern;
using ssd_fault::wait_until;
using ssd_test::demote;
using ssd_test::TempDir;
using Op = FaultyFs::Op;

namespace {

constexpr size_t kValue = 64 << 10;

// The tier's log lines, as the server's log would get them.
struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  size_t count(std::string_view part) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (const std::string& l : lines) n += l.find(part) != std::string::npos;
    return n;
  }
};

std::unique_ptr<SsdTier> open_tier(Keyspace& ks, const std::string& dir,
                                   std::shared_ptr<FaultyFs> fs, Log& log) {
  SsdTierOptions o;
  o.store.path = dir + "/db";
  o.store.write_buffer_size = 4 << 20;
  o.store.file_system = std::move(fs);
  o.admission = Admission::kReuse;
  o.log = [&log](bool, std::string_view m) {
    std::lock_guard lock(log.mu);
    log.lines.emplace_back(m);
  };
  SsdStatus st;
  auto tier = SsdTier::open(ks, o, &st);
  INFO(st.message);
  REQUIRE(tier != nullptr);
  return tier;
}

void put(Keyspace& ks, const std::string& key, uint32_t gen = 0) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  s.upsert(key, ValueRef::copy_of(pattern(key, gen, kValue)), 0, now_ms());
}

bool exists(Keyspace& ks, const std::string& key) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  return s.find(key, now_ms()) != nullptr;
}

// `key`'s value in memory, if any (no load).
ValueRef in_memory(Keyspace& ks, const std::string& key) {
  Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  Shard::Item* item = s.find(key, now_ms());
  return item != nullptr ? item->second.value : ValueRef();
}

SsdTier::Loaded load(SsdTier& tier, const std::string& key) {
  return tier.load(key, now_ms(), [](size_t n) { return ValueRef::allocate(n); });
}

// `key` is on SSD only and loads back byte for byte.
void check_loads(SsdTier& tier, const std::string& key, uint32_t gen = 0) {
  CAPTURE(key);
  REQUIRE(tier.cold(key, now_ms()));
  SsdTier::Loaded l = load(tier, key);
  INFO(l.status.message);
  REQUIRE(l.status.ok());
  REQUIRE(l.pin);
  CHECK(l.pin->view() == pattern(key, gen, kValue));
}

void settle(SsdTier& tier) { REQUIRE(wait_until([&] { return tier.pending_bytes() == 0; })); }

std::string key(const char* prefix, int i) { return prefix + std::to_string(i); }

// An evictor that always finds memory over its target, demoting through `tier`.
std::unique_ptr<Evictor> evictor(Keyspace& ks, SsdTier& tier) {
  auto ev = std::make_unique<Evictor>(ks, [] { return uint64_t{1} << 40; });
  EvictionOptions o;
  o.policy = EvictionPolicy::kAllkeysLru;
  o.maxmemory = uint64_t{1} << 30;
  ev->set_options(o);
  ev->set_demoter(&tier);
  return ev;
}

// Puts `<prefix>0`..`<prefix>{n-1}`, demotes them and waits until they are on SSD only.
void demote_all(SsdTier& tier, Keyspace& ks, const char* prefix, int n) {
  for (int i = 0; i < n; ++i) put(ks, key(prefix, i));
  for (int i = 0; i < n; ++i) REQUIRE(demote(tier, ks, key(prefix, i)) > 0);
  settle(tier);
  for (int i = 0; i < n; ++i) REQUIRE(tier.cold(key(prefix, i), now_ms()));
}

}  // namespace

TEST_CASE("tier: a disk that refuses writes (RocksDB's no-space) stops admission; healed, values "
          "land again") {
  TempDir dir;
  Keyspace ks(8);
  auto fs = FaultyFs::make();
  Log log;
  auto tier = open_tier(ks, dir.path, fs, log);
  tier->start();
  demote_all(*tier, ks, "a", 8);
  CHECK(tier->stats().demotions == 8);
  CHECK(tier->admission_state(now_ms()) == "keeping_up");

  // RocksDB meets ENOSPC itself (past the store's free-space check) in a flush: the blob file
  // write fails, and RocksDB stops writes until resumed. (On a WAL append RocksDB 7.8 makes
  // the same error fatal: see the store's tests.)
  // `t0`: before the failure, so before its retry time (the evictor below runs "then").
  const int64_t t0 = now_ms();
  fs->fail(Op::kWrite, FaultyFs::kBlob, FaultyFs::kForever, FaultyFs::Error::kNoSpace);
  CHECK(tier->store().flush().code == SsdStatus::Code::kNoSpace);
  for (int i = 0; i < 4; ++i) put(ks, key("b", i));
  // The first is admitted (the tier does not know yet); once its write failed, the rest are
  // refused (how many depends on the writer's speed: no count asserted).
  CHECK(demote(*tier, ks, key("b", 0)) > 0);
  for (int i = 1; i < 4; ++i) demote(*tier, ks, key("b", i));
  settle(*tier);
  CHECK(tier->stats().write_errors >= 1);
  CHECK_FALSE(tier->healthy());
  CHECK_FALSE(tier->store().halted());  // resumable
  CHECK(tier->admission_state(now_ms()) == "disk_full");
  CHECK(tier->last_error().find("injected write failure") != std::string::npos);
  CHECK(log.count("ssd tier: disk full, nothing is admitted") == 1);
  CHECK(tier->stats().demotions == 8);
  // The values whose write failed stay in memory, right, with no SSD flag.
  for (int i = 0; i < 4; ++i) {
    ValueRef v = in_memory(ks, key("b", i));
    REQUIRE(v);
    CHECK(v->view() == pattern(key("b", i), 0, kValue));
    CHECK_FALSE(tier->cold(key("b", i), now_ms()));
  }
  // Before the retry time nothing is admitted: memory evicts as without the tier.
  const uint64_t rejected = tier->stats().rejected, admitted = tier->stats().admitted;
  CHECK_FALSE(tier->accepting(t0));
  auto ev = evictor(ks, *tier);
  ev->evict_to(0, t0);
  CHECK(tier->stats().admitted == admitted);
  CHECK(tier->stats().rejected >= rejected + 4);
  CHECK(ev->evicted_keys() >= 4);
  for (int i = 0; i < 4; ++i) CHECK_FALSE(exists(ks, key("b", i)));
  // Values already on SSD are still read.
  check_loads(*tier, "a0");

  // Healed: the writer's retries resume RocksDB (after its own recovery); new values land.
  fs->heal_all();
  REQUIRE(wait_until([&] { return tier->healthy() && tier->accepting(now_ms()); }));
  for (int i = 0; i < 4; ++i) put(ks, key("c", i));
  for (int i = 0; i < 4; ++i) CHECK(demote(*tier, ks, key("c", i)) > 0);
  settle(*tier);
  CHECK(tier->stats().demotions == 12);
  for (int i = 0; i < 4; ++i) check_loads(*tier, key("c", i));
  for (int i = 1; i < 8; ++i) check_loads(*tier, key("a", i));
  CHECK(log.count("ssd tier: the disk has room again: writes succeed, demotion restarts") == 1);
  CHECK(tier->admission_state(now_ms()) == "keeping_up");
  tier->stop();
}

TEST_CASE("tier: an I/O error halts the store until a restart; reads go on, nothing is lost") {
  TempDir dir;
  auto fs = FaultyFs::make();
  Log log;
  {
    Keyspace ks(8);
    auto tier = open_tier(ks, dir.path, fs, log);
    tier->start();
    demote_all(*tier, ks, "a", 8);

    fs->fail(Op::kWrite, FaultyFs::kWal);  // EIO from the disk
    for (int i = 0; i < 4; ++i) put(ks, key("b", i));
    CHECK(demote(*tier, ks, key("b", 0)) > 0);  // the rest may be refused once it failed
    for (int i = 1; i < 4; ++i) demote(*tier, ks, key("b", i));
    settle(*tier);
    CHECK(tier->stats().write_errors >= 1);
    CHECK(tier->store().halted());
    CHECK(tier->admission_state(now_ms()) == "error");
    CHECK(log.count("ssd tier: write failed, nothing is admitted") == 1);
    CHECK(log.count("ssd tier: the store stopped all writes") == 1);
    CHECK(tier->last_error().find("injected write failure") != std::string::npos);
    for (int i = 0; i < 4; ++i) {
      ValueRef v = in_memory(ks, key("b", i));
      REQUIRE(v);
      CHECK(v->view() == pattern(key("b", i), 0, kValue));
    }

    // Healed, it stays halted: no demotion is accepted, even past any retry time.
    fs->heal_all();
    CHECK_FALSE(tier->accepting(now_ms() + 3'600'000));
    // tiering.ssd.admission wait: the values stay in memory (nothing evicted for the disk).
    tier->set_admission(Admission::kWait);
    auto ev = evictor(ks, *tier);
    ev->evict_to(0, now_ms());
    CHECK(ev->evicted_keys() == 0);
    for (int i = 0; i < 4; ++i) CHECK(in_memory(ks, key("b", i)));
    // reuse: evicted as without the tier.
    tier->set_admission(Admission::kReuse);
    ev->evict_to(0, now_ms());
    for (int i = 0; i < 4; ++i) CHECK_FALSE(exists(ks, key("b", i)));
    // Reads of values on SSD go on (a promotion needs no write).
    check_loads(*tier, "a0");
    check_loads(*tier, "a1");
    CHECK(tier->store().halted());
    tier->stop();
  }
  // The restart: a new keyspace recovers every value written before the fault.
  Keyspace ks(8);
  auto tier = open_tier(ks, dir.path, fs, log);
  CHECK_FALSE(tier->store().halted());
  CHECK(tier->recover(now_ms()) == 8);
  tier->start();
  for (int i = 0; i < 8; ++i) check_loads(*tier, key("a", i));
  for (int i = 0; i < 4; ++i) CHECK_FALSE(exists(ks, key("b", i)));
  demote_all(*tier, ks, "c", 4);
  for (int i = 0; i < 4; ++i) check_loads(*tier, key("c", i));
  CHECK(tier->healthy());
  tier->stop();
}

TEST_CASE("tier: a failed read is an error for that load; the key stays on SSD and reads right "
          "after") {
  TempDir dir;
  Keyspace ks(8);
  auto fs = FaultyFs::make();
  Log log;
  auto tier = open_tier(ks, dir.path, fs, log);
  tier->start();
  demote_all(*tier, ks, "a", 4);
  REQUIRE(tier->store().flush().ok());  // the values in blob files: loads read the disk

  fs->fail(Op::kRead, FaultyFs::kBlob);
  SsdTier::Loaded l = load(*tier, "a0");
  CHECK(l.status.code == SsdStatus::Code::kIoError);
  CHECK(l.status.message.find("injected read failure") != std::string::npos);
  CHECK_FALSE(l.pin);
  CHECK(tier->stats().read_errors == 1);
  CHECK(tier->cold("a0", now_ms()));  // still on SSD, not dropped
  CHECK(tier->cold_keys() == 4);

  fs->fail(Op::kRead, FaultyFs::kBlob, 1);  // the next read only
  CHECK_FALSE(load(*tier, "a1").status.ok());
  CHECK(tier->stats().read_errors == 2);
  check_loads(*tier, "a1");

  fs->heal_all();
  check_loads(*tier, "a0");
  CHECK(tier->healthy());  // a read error is not a write failure
  CHECK_FALSE(tier->store().halted());
  CHECK(tier->admission_state(now_ms()) == "keeping_up");
  tier->stop();
}

TEST_CASE("tier: values demoted and loaded while faults come and go read back right or as "
          "errors") {
  TempDir dir;
  Keyspace ks(8);
  auto fs = FaultyFs::make();
  Log log;
  auto tier = open_tier(ks, dir.path, fs, log);
  tier->start();
  constexpr int kThreads = 2, kKeys = 16, kRounds = 40;
  std::atomic<uint64_t> right{0}, errors{0}, wrong{0}, unclear{0};
  std::vector<std::vector<uint32_t>> gens(kThreads, std::vector<uint32_t>(kKeys, 0));
  // One round of thread `t`: new generations now and then, demote every key, load the cold
  // ones, check every value it sees.
  auto round = [&](int t, int r) {
    const std::string prefix = "w" + std::to_string(t) + ":";
    for (int i = 0; i < kKeys; ++i) {
      const std::string k = key(prefix.c_str(), i);
      if (r % 4 == 0) put(ks, k, ++gens[t][i]);
      {
        Shard& s = ks.shard_of(k);
        std::lock_guard lock(s.mu);
        if (Shard::Item* item = s.find(k, now_ms())) tier->demote(s, item, now_ms(), true);
      }
      if (tier->cold(k, now_ms())) {
        SsdTier::Loaded l = load(*tier, k);
        if (!l.status.ok()) {
          if (l.status.message.empty()) ++unclear;
          ++errors;
        } else if (l.pin && l.pin->view() == pattern(k, gens[t][i], kValue)) {
          ++right;
        } else if (l.pin) {
          ++wrong;
        }
        if (l.transient) tier->release(k, l.pin);
      } else if (ValueRef v = in_memory(ks, k)) {
        if (v->view() == pattern(k, gens[t][i], kValue)) ++right;
        else ++wrong;
      }
    }
  };
  // The faults change between rounds (both threads run each round at once): all heals, the
  // writes settle and flush into blob files; reads of blob files fail while the threads load;
  // all heals; at round 30 an I/O error on the WAL halts the store for good. Which load or
  // write meets which fault depends on timing: only the outcomes are checked. (A no-space
  // flush, which RocksDB resumes, is the first test's.)
  for (int r = 0; r < kRounds; ++r) {
    switch (r % 3) {
      case 0:
        fs->heal(Op::kRead);
        settle(*tier);
        tier->store().flush();
        break;
      case 1: fs->fail(Op::kRead, FaultyFs::kBlob, 4); break;
      case 2: fs->heal(Op::kRead); break;
    }
    if (r == 30) fs->fail(Op::kWrite, FaultyFs::kWal, 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(round, t, r);
    for (auto& t : threads) t.join();
  }
  fs->heal_all();
  settle(*tier);
  CHECK(wrong == 0);
  CHECK(unclear == 0);
  CHECK(right > 0);
  MESSAGE("right=" << right.load() << " errors=" << errors.load()
                   << " reads=" << tier->stats().reads.load()
                   << " read_faults=" << fs->failed(Op::kRead)
                   << " write_errors=" << tier->stats().write_errors.load()
                   << " halted=" << tier->store().halted());
  // Every key is still there with its last value: in memory, or loaded from SSD.
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kKeys; ++i) {
      const std::string k = key(("w" + std::to_string(t) + ":").c_str(), i);
      CAPTURE(k);
      if (tier->cold(k, now_ms())) {
        check_loads(*tier, k, gens[t][i]);
      } else {
        ValueRef v = in_memory(ks, k);
        REQUIRE(v);
        CHECK(v->view() == pattern(k, gens[t][i], kValue));
      }
    }
  tier->stop();
}
