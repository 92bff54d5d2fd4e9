// Unit tests of the SSD store's on-disk format (docs/ssd-tier.md, "On-disk format"): records
// keyed by [slot][key], one slot's records read by one range (scan_slot), the conversion of
// format 1 (the committed fixture tests/fixtures/ssd-v1 written by the binary of before, and
// stores written here with format 1's encoding), a conversion killed halfway and resumed, and
// the refusal of stores this version cannot read.
#include <doctest.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/write_batch.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/slot.h"
#include "tiering/ssd_store.h"
#include "tiering/ssd_store_codec.h"
#include "tiering/ssd_tier.h"
#include "tests/unit/ssd_test_util.h"

using namespace tiering;

using ssd_test::read_value;
using ssd_test::span_of;
using ssd_test::TempDir;

namespace {



uint16_t real_slot(std::string_view key) { return cluster::key_slot(key); }

// Log lines of a store's open, for the checks.
struct Said {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(bool, std::string_view)> fn() {
    return [this](bool, std::string_view m) {
      std::lock_guard lock(mu);
      lines.emplace_back(m);
    };
  }
  bool any(std::string_view part) {
    std::lock_guard lock(mu);
    for (const auto& l : lines)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
};

SsdOptions options_at(const std::string& path, Said* said = nullptr) {
  SsdOptions o;
  o.path = path;
  o.write_buffer_size = 4 << 20;
  o.slot_of = real_slot;
  if (said != nullptr) o.log = said->fn();
  return o;
}

std::unique_ptr<SsdStore> open_at(const std::string& path, Said* said = nullptr) {
  SsdStatus st;
  auto store = SsdStore::open(options_at(path, said), &st);
  INFO(st.message);
  REQUIRE(store != nullptr);
  return store;
}


std::map<std::string, SsdRecordInfo> scan_all(SsdStore& s, int64_t now = 0) {
  std::map<std::string, SsdRecordInfo> out;
  REQUIRE(s.scan(now, [&](const SsdRecordInfo& r) {
    SsdRecordInfo copy = r;
    copy.key = {};
    out.emplace(std::string(r.key), copy);
    return true;
  }).ok());
  return out;
}

// ---- the committed fixture (tests/fixtures/ssd-v1, see its README.md) ----

struct FixtureKey {
  std::string key;
  int64_t deadline = 0;  // absolute ms, 0 = none
  std::string value;
};

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

std::string pattern(size_t size, unsigned seed) {
  std::string s(size, '\0');
  for (size_t j = 0; j < size; ++j)
    s[j] = static_cast<char>((j * 131 + seed * 7 + (j >> 8)) & 0xFF);
  return s;
}

const std::string kFixture = std::string(STRATAKV_SOURCE_DIR) + "/tests/fixtures/ssd-v1";

std::vector<FixtureKey> fixture_keys() {
  std::ifstream in(kFixture + "/keys.txt");
  REQUIRE(in.good());
  std::vector<FixtureKey> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key_hex, spec;
    FixtureKey k;
    fields >> key_hex >> k.deadline >> spec;
    k.key = unhex(key_hex);
    if (spec.rfind("hex:", 0) == 0) {
      k.value = unhex(spec.substr(4));
    } else {
      REQUIRE(spec.rfind("pattern:", 0) == 0);
      const size_t colon = spec.find(':', 8);
      k.value = pattern(std::stoul(spec.substr(8, colon - 8)),
                        static_cast<unsigned>(std::stoul(spec.substr(colon + 1))));
    }
    out.push_back(std::move(k));
  }
  REQUIRE(out.size() == 16);
  return out;
}

// A copy of the fixture's database under `dir`; returns its path.
std::string copy_fixture(const std::string& dir) {
  const std::string db = dir + "/db";
  std::filesystem::copy(kFixture + "/db", db, std::filesystem::copy_options::recursive);
  return db;
}

// ---- stores of format 1 written here, with format 1's encodings ----

// Writes a store of format 1 (families default, meta, order; records keyed by the bare key) at
// `path`, as the stratakv of before did: values of 4 KiB and more in blob files.
void write_v1(const std::string& path, const std::vector<FixtureKey>& records) {
  rocksdb::DBOptions db;
  db.create_if_missing = true;
  db.create_missing_column_families = true;
  rocksdb::ColumnFamilyOptions data;
  data.enable_blob_files = true;
  data.min_blob_size = 4096;
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, data}, {"meta", {}}, {"order", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* raw = nullptr;
  REQUIRE(rocksdb::DB::Open(db, path, families, &h, &raw).ok());
  uint64_t seq = 1;
  for (const FixtureKey& r : records) {
    rocksdb::WriteBatch wb;
    char sum[8];
    ssd_codec::put_le(sum, ssd_codec::checksum(r.value.data(), r.value.size()));
    wb.Put(h[0], r.key, std::string(sum, 8) + r.value);
    wb.Put(h[1], r.key, ssd_codec::encode({seq, r.deadline, r.value.size()}));
    wb.Put(h[2], ssd_codec::encode_seq(seq), r.key);
    ++seq;
    REQUIRE(raw->Write(rocksdb::WriteOptions(), &wb).ok());
  }
  REQUIRE(raw->Flush(rocksdb::FlushOptions(), h).ok());
  for (auto* x : h) REQUIRE(raw->DestroyColumnFamilyHandle(x).ok());
  delete raw;
}

// Opens the store at `path` with RocksDB itself, every family, read-only or not, and applies
// `fn` (families by name).
void with_families(const std::string& path, bool read_only,
                   const std::function<void(rocksdb::DB&,
                                            std::map<std::string, rocksdb::ColumnFamilyHandle*>&)>& fn) {
  std::vector<std::string> names;
  REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const auto& n : names) families.push_back({n, {}});
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* raw = nullptr;
  if (read_only)
    REQUIRE(rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path, families, &h, &raw).ok());
  else
    REQUIRE(rocksdb::DB::Open(rocksdb::DBOptions(), path, families, &h, &raw).ok());
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  for (auto* cf : h) by_name[cf->GetName()] = cf;
  fn(*raw, by_name);
  for (auto& [n, cf] : by_name) REQUIRE(raw->DestroyColumnFamilyHandle(cf).ok());
  delete raw;
}

// Entries per family of the database at `path`, read without changing it.
std::map<std::string, size_t> family_counts(const std::string& path) {
  std::map<std::string, size_t> out;
  with_families(path, true, [&](rocksdb::DB& db, auto& families) {
    for (auto& [name, cf] : families) {
      std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions(), cf));
      size_t n = 0;
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
      out[name] = n;
    }
  });
  return out;
}

// Opens the store at `path` with RocksDB itself and applies `fn` (families by name).
void raw_edit(const std::string& path,
              const std::function<void(rocksdb::DB&,
                                       std::map<std::string, rocksdb::ColumnFamilyHandle*>&)>& fn) {
  with_families(path, false, fn);
}

// The records of the conversion tests: small and blob values, deadlines, binary keys, and a
// bare key that is byte for byte the format-2 record key of another one ("foo").
std::vector<FixtureKey> v1_records(size_t n) {
  std::vector<FixtureKey> out;
  for (size_t i = 0; i < n; ++i) {
    FixtureKey k;
    k.key = "key:" + std::to_string(i);
    k.value = pattern(i % 10 == 0 ? 6000 + i : i % 300, static_cast<unsigned>(i));
    k.deadline = i % 7 == 0 ? 4'102'444'800'000 + static_cast<int64_t>(i) : 0;
    out.push_back(std::move(k));
  }
  out.push_back({"foo", 0, "bare foo"});
  out.push_back({ssd_codec::record_key(real_slot("foo"), "foo"), 0, "looks like foo's record key"});
  out.push_back({std::string("bin\0\xff\r\n", 6), 4'102'444'800'000, pattern(5000, 9)});
  return out;
}

void check_records(SsdStore& s, const std::vector<FixtureKey>& records) {
  auto all = scan_all(s);
  CHECK(all.size() == records.size());
  uint64_t bytes = 0;
  for (const FixtureKey& r : records) {
    INFO("key " << r.key);
    auto it = all.find(r.key);
    REQUIRE(it != all.end());
    CHECK(it->second.expire_ms == r.deadline);
    CHECK(it->second.size == r.value.size());
    CHECK(it->second.slot == real_slot(r.key));
    CHECK(read_value(s, r.key) == r.value);
    bytes += r.key.size() + r.value.size();
  }
  CHECK(s.live_records() == records.size());
  CHECK(s.live_bytes() == bytes);
}

}  // namespace

TEST_CASE("the fixture of format 1 converts on open: every key byte-exact with its TTL") {
  TempDir dir;
  const std::string db = copy_fixture(dir.path);
  const std::vector<FixtureKey> keys = fixture_keys();
  const int64_t now = now_ms();
  size_t live = 0;
  for (const FixtureKey& k : keys) live += (k.deadline == 0 || k.deadline > now);
  REQUIRE(live == keys.size() - 1);  // ttl:short is past its deadline

  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    Said said;
    auto s = open_at(db, &said);
    // The first open converts and says so; the second finds format 2.
    CHECK(said.any("converted format 1 to format 2: records=16 ") == (round == 0));
    CHECK(said.any("convert") == (round == 0));
    uint64_t expired = 0;
    std::map<std::string, SsdRecordInfo> seen;
    REQUIRE(s->scan(now, [&](const SsdRecordInfo& r) {
      seen.emplace(std::string(r.key), r).first->second.key = {};
      return true;
    }, &expired).ok());
    CHECK(seen.size() == live);
    CHECK(expired == 1);  // skipped, not swept: the store alone never sweeps
    for (const FixtureKey& k : keys) {
      INFO("key " << k.key);
      auto it = seen.find(k.key);
      if (k.deadline != 0 && k.deadline <= now) {
        CHECK(it == seen.end());
        continue;
      }
      REQUIRE(it != seen.end());
      CHECK(it->second.expire_ms == k.deadline);
      CHECK(it->second.size == k.value.size());
      CHECK(it->second.slot == real_slot(k.key));
      CHECK(read_value(*s, k.key) == k.value);
    }
    CHECK(s->live_records() == keys.size());  // the expired record is there until swept
  }
  // Format 1's family is gone, `default` is empty, and its blob file was deleted.
  CHECK(!std::filesystem::exists(db + "/000016.blob"));
  auto counts = family_counts(db);
  CHECK(counts.count("meta") == 0);
  CHECK(counts.at("default") == 0);
  CHECK(counts.at("records") == keys.size());
  CHECK(counts.at("format") == 1);
}

TEST_CASE("the fixture recovers through the tier: cold entries with their deadlines, values load") {
  TempDir dir;
  const std::string db = copy_fixture(dir.path);
  const std::vector<FixtureKey> keys = fixture_keys();
  Keyspace ks(8);
  SsdTierOptions o;
  o.store = options_at(db);
  SsdStatus st;
  auto tier = SsdTier::open(ks, o, &st);
  INFO(st.message);
  REQUIRE(tier != nullptr);
  const int64_t now = now_ms();
  CHECK(tier->recover(now) == keys.size() - 1);
  tier->start();
  CHECK(ks.size() == keys.size() - 1);
  for (const FixtureKey& k : keys) {
    INFO("key " << k.key);
    Shard& shard = ks.shard_of(k.key);
    int64_t expire = -1;
    bool found = false;
    {
      std::lock_guard lock(shard.mu);
      if (Shard::Item* item = shard.find(k.key, now)) {
        found = true;
        expire = item->second.expire_ms;
      }
    }
    if (k.deadline != 0 && k.deadline <= now) {
      CHECK(!found);
      continue;
    }
    REQUIRE(found);
    CHECK(expire == k.deadline);
    SsdTier::Loaded l = tier->load(k.key, now, [](size_t n) { return ValueRef::allocate(n); });
    REQUIRE(l.pin);
    CHECK(l.pin->view() == k.value);
  }
  CHECK(tier->store().live_records() == keys.size() - 1);  // the expired one was swept
}

TEST_CASE("scan_slot reads one slot's records by a key range, not a walk of the store") {
  TempDir dir;
  auto s = open_at(dir.path + "/db");
  // 4000 keys over many slots, and 25 in the slot of the tag {user1000}.
  const std::string v(100, 'v');
  std::set<std::string> tagged;
  const uint16_t slot = real_slot("{user1000}");
  for (int i = 0; i < 4000; ++i) {
    SsdBatch b;
    const std::string key = "k:" + std::to_string(i);
    if (real_slot(key) == slot) tagged.insert(key);  // a key of that slot by chance
    b.put(key, 0, span_of(v));
    REQUIRE(s->write(b).ok());
    if (i == 3000) REQUIRE(s->flush().ok());  // some in SST files, some in the memtable
  }
  for (int i = 0; i < 25; ++i) {
    const std::string key = "{user1000}." + std::to_string(i);
    tagged.insert(key);
    SsdBatch b;
    b.put(key, i == 3 ? 1 : 0, span_of(v));  // one past its deadline
    REQUIRE(s->write(b).ok());
  }

  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  std::set<std::string> got;
  uint64_t expired = 0;
  REQUIRE(s->scan_slot(slot, now_ms(), [&](const SsdRecordInfo& r) {
    CHECK(r.slot == slot);
    got.insert(std::string(r.key));
    return true;
  }, &expired).ok());
  const uint64_t slot_steps = rocksdb::get_perf_context()->internal_key_skipped_count;
  rocksdb::get_perf_context()->Reset();
  size_t all = 0;
  REQUIRE(s->scan(0, [&](const SsdRecordInfo&) { return ++all, true; }).ok());
  const uint64_t all_steps = rocksdb::get_perf_context()->internal_key_skipped_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);

  std::set<std::string> want = tagged;
  want.erase("{user1000}.3");
  CHECK(got == want);
  CHECK(expired == 1);
  CHECK(all == 4025);
  // The iterator stepped over that slot's records only (RocksDB's count of internal keys its
  // iterators stepped over), not over the store's.
  INFO("slot scan stepped " << slot_steps << " keys, a full scan " << all_steps);
  CHECK(all_steps >= 4000);  // the counter works in this RocksDB build
  CHECK(slot_steps <= tagged.size() + 2);

  // A range of slots, and the edges of the slot space.
  got.clear();
  const uint16_t a = real_slot("k:1"), b = real_slot("k:2");
  const uint16_t lo = std::min(a, b), hi = std::max(a, b);
  size_t in_range = 0;
  REQUIRE(s->scan(0, [&](const SsdRecordInfo& r) {
    in_range += r.slot >= lo && r.slot <= hi;
    return true;
  }).ok());
  size_t n = 0;
  REQUIRE(s->scan_slots(lo, hi, 0, [&](const SsdRecordInfo& r) {
    CHECK(r.slot >= lo);
    CHECK(r.slot <= hi);
    return ++n, true;
  }).ok());
  CHECK(n == in_range);
  n = 0;
  REQUIRE(s->scan_slots(0, UINT16_MAX, 0, [&](const SsdRecordInfo&) { return ++n, true; }).ok());
  CHECK(n == 4025);
  n = 0;
  REQUIRE(s->scan_slots(5, 4, 0, [&](const SsdRecordInfo&) { return ++n, true; }).ok());
  CHECK(n == 0);
}

TEST_CASE("a store of format 1 converts in place, and reopens without converting") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  const auto records = v1_records(3000);
  write_v1(db, records);
  // A header without a value (format 1 read it as an error and dropped the key) and a value
  // without a header (never read): both go.
  raw_edit(db, [](rocksdb::DB& raw, auto& cf) {
    REQUIRE(raw.Put(rocksdb::WriteOptions(), cf.at("meta"), "no value",
                    ssd_codec::encode({90000, 0, 5})).ok());
    REQUIRE(raw.Put(rocksdb::WriteOptions(), cf.at("default"), "no header", "12345678x").ok());
  });
  {
    Said said;
    auto s = open_at(db, &said);
    CHECK(said.any("converted format 1 to format 2: records=" + std::to_string(records.size()) +
                   " "));
    CHECK(said.any(" dropped=1 (headers without a readable value"));
    check_records(*s, records);
    CHECK(family_counts(db).at("default") == 0);
    // New writes go on from the records' demotion order.
    SsdBatch b;
    const std::string n = "n";
    b.put("new", 0, span_of(n));
    REQUIRE(s->write(b).ok());
    CHECK(scan_all(*s).at("new").seq == records.size() + 1);
  }
  Said said;
  auto s = open_at(db, &said);
  CHECK(!said.any("convert"));
  auto all = scan_all(*s);
  CHECK(all.size() == records.size() + 1);
  CHECK(read_value(*s, "foo") == "bare foo");
  // Capacity drops still follow the demotion order carried over from format 1.
  std::vector<std::string> dropped;
  REQUIRE(s->drop_oldest(0, 3, [](std::string_view) { return true; }, &dropped).ok());
  CHECK(dropped == std::vector<std::string>{"key:0", "key:1", "key:2"});
}

// The helper of the next test, run in a process of its own (STRATAKV_SSD_CONVERT_DIR set): it
// opens a store of format 1 with a slot function that kills the process at its 2500th call,
// halfway through the conversion (batches of 1024 records). Without the variable it does
// nothing.
TEST_CASE("ssd convert killer (helper process of the interrupted conversion test)") {
  const char* dir = std::getenv("STRATAKV_SSD_CONVERT_DIR");
  if (dir == nullptr) return;
  SsdOptions o = options_at(dir);
  static int calls = 0;
  o.slot_of = [](std::string_view key) {
    if (++calls == 2500) kill(getpid(), SIGKILL);
    return real_slot(key);
  };
  SsdStatus st;
  SsdStore::open(o, &st);
  _exit(3);  // not reached
}

TEST_CASE("a conversion killed halfway loses nothing and completes at the next open") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  const auto records = v1_records(3000);
  write_v1(db, records);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("STRATAKV_SSD_CONVERT_DIR", db.c_str(), 1);
    execl("/proc/self/exe", "ssd_test", "--test-case=ssd convert killer*", "--no-run=0",
          static_cast<char*>(nullptr));
    _exit(5);
  }
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  INFO("child status " << wstatus);
  REQUIRE(WIFSIGNALED(wstatus));
  // Halfway: whole batches moved, the rest still in format 1, no record in both or neither.
  auto counts = family_counts(db);
  INFO("meta " << counts["meta"] << ", records " << counts["records"]);
  CHECK(counts.at("records") == 2048);
  CHECK(counts.at("meta") == records.size() - 2048);
  CHECK(counts.at("format") == 0);

  Said said;
  auto s = open_at(db, &said);
  CHECK(said.any("converted format 1 to format 2: records=" +
                 std::to_string(records.size() - 2048)));
  check_records(*s, records);
}

TEST_CASE("a store of an unknown format is refused and left as it is") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  {
    auto s = open_at(db);
    SsdBatch b;
    const std::string value = "value";
    b.put("k", 0, span_of(value));
    REQUIRE(s->write(b).ok());
  }
  raw_edit(db, [](rocksdb::DB& raw, auto& cf) {
    REQUIRE(raw.Put(rocksdb::WriteOptions(), cf.at("format"), "version", "3").ok());
  });
  SsdStatus st;
  CHECK(SsdStore::open(options_at(db), &st) == nullptr);
  CHECK(st.code == SsdStatus::Code::kInvalid);
  CHECK(st.message.find("format '3'") != std::string::npos);
  CHECK(st.message.find("newer version") != std::string::npos);
  CHECK(st.message.find("tiering.ssd.recover no") != std::string::npos);
  // Nothing was lost: back at format 2 it reads.
  raw_edit(db, [](rocksdb::DB& raw, auto& cf) {
    REQUIRE(raw.Put(rocksdb::WriteOptions(), cf.at("format"), "version", "2").ok());
  });
  CHECK(read_value(*open_at(db), "k") == "value");

  // A column family this version does not know.
  raw_edit(db, [](rocksdb::DB& raw, auto& cf) {
    rocksdb::ColumnFamilyHandle* h = nullptr;
    REQUIRE(raw.CreateColumnFamily({}, "future", &h).ok());
    cf["future"] = h;
  });
  CHECK(SsdStore::open(options_at(db), &st) == nullptr);
  CHECK(st.code == SsdStatus::Code::kInvalid);
  CHECK(st.message.find("unknown column family 'future'") != std::string::npos);
}

TEST_CASE("a store opened with another slot function is refused, not misread") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  {
    auto s = open_at(db);
    const std::string v = "v";
    for (int i = 0; i < 50; ++i) {
      SsdBatch b;
      b.put("k" + std::to_string(i), 0, span_of(v));
      REQUIRE(s->write(b).ok());
    }
  }
  SsdOptions o = options_at(db);
  o.slot_of = nullptr;  // every key in slot 0
  SsdStatus st;
  CHECK(SsdStore::open(o, &st) == nullptr);
  CHECK(st.code == SsdStatus::Code::kInvalid);
  CHECK(st.message.find("key-to-slot") != std::string::npos);
  CHECK(open_at(db)->live_records() == 50);
}

TEST_CASE("a RocksDB database that is not a store is refused") {
  TempDir dir;
  const std::string db = dir.path + "/db";
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    REQUIRE(rocksdb::DB::Open(o, db, &raw).ok());
    REQUIRE(raw->Put(rocksdb::WriteOptions(), "someone", "else's data").ok());
    delete raw;
  }
  SsdStatus st;
  CHECK(SsdStore::open(options_at(db), &st) == nullptr);
  CHECK(st.code == SsdStatus::Code::kInvalid);
  CHECK(st.message.find("not an SSD store") != std::string::npos);
}
