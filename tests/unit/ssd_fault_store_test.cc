// Unit tests of tiering::SsdStore under injected RocksDB I/O errors (tests/fakes/faulty_fs.h):
// a failed read is an error and never wrong bytes; a failed write fails its batch whole; an I/O
// error in a WAL, flush, sync or file creation halts RocksDB's writes until a reopen (reads go
// on), while RocksDB's own no-space error is resumed; a reopen brings back every acknowledged
// write. (docs/ssd-tier.md, "Capacity and failures".)
#include <doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/fakes/faulty_fs.h"
#include "tests/unit/ssd_fault_util.h"
#include "tests/unit/ssd_test_util.h"
#include "tiering/ssd_store.h"

using namespace tiering;
using fakes::FaultyFs;
using ssd_fault::pattern;
using ssd_test::span_of;
using ssd_test::TempDir;
using Op = FaultyFs::Op;

namespace {

constexpr size_t kBig = 64 << 10;  // a blob (min_blob_size 4096)
constexpr size_t kSmall = 100;     // stays in the LSM tree

std::unique_ptr<SsdStore> open_store(const std::string& dir, std::shared_ptr<FaultyFs> fs) {
  SsdOptions o;
  o.path = dir + "/db";
  o.write_buffer_size = 4 << 20;
  o.file_system = std::move(fs);
  SsdStatus st;
  auto s = SsdStore::open(o, &st);
  INFO(st.message);
  REQUIRE(s != nullptr);
  return s;
}

SsdStatus put(SsdStore& s, const std::vector<std::string>& keys, size_t n) {
  std::vector<std::string> values;
  values.reserve(keys.size());
  SsdBatch b;
  for (const std::string& k : keys) {
    values.push_back(pattern(k, 0, n));
    b.put(k, 0, span_of(values.back()));
  }
  return s.write(b);
}

// Reads `key`: its status, and the bytes in `*out`.
SsdStatus get(SsdStore& s, const std::string& key, std::string* out) {
  size_t size = 0;
  return s.read(key, [&](size_t n) {
    out->resize(n);
    return std::span<std::byte>(reinterpret_cast<std::byte*>(out->data()), n);
  }, &size);
}

// `key` reads back as written (pattern of `n` bytes).
void check_value(SsdStore& s, const std::string& key, size_t n) {
  std::string v;
  SsdStatus st = get(s, key, &v);
  INFO(key << ": " << st.message);
  REQUIRE(st.ok());
  CHECK(v == pattern(key, 0, n));
}

void check_absent(SsdStore& s, const std::string& key) {
  std::string v;
  CHECK(get(s, key, &v).code == SsdStatus::Code::kNotFound);
}

}  // namespace

TEST_CASE("store: a failed read is an error, never wrong bytes, and the value reads right after") {
  TempDir dir;
  auto fs = FaultyFs::make();
  auto s = open_store(dir.path, fs);
  REQUIRE(put(*s, {"big0", "big1"}, kBig).ok());
  REQUIRE(put(*s, {"small0"}, kSmall).ok());
  REQUIRE(s->flush().ok());  // into blob and table files: reads now touch the disk

  fs->fail(Op::kRead, FaultyFs::kBlob);
  std::string v;
  SsdStatus st = get(*s, "big0", &v);
  CHECK(st.code == SsdStatus::Code::kIoError);
  CHECK(st.message.find("injected read failure") != std::string::npos);
  CHECK(fs->failed(Op::kRead) >= 1);
  check_value(*s, "small0", kSmall);  // table files still read

  // The next read only fails; the one after succeeds.
  fs->fail(Op::kRead, FaultyFs::kBlob, 1);
  const uint64_t failed = fs->failed(Op::kRead);
  CHECK(get(*s, "big1", &v).code == SsdStatus::Code::kIoError);
  CHECK(fs->failed(Op::kRead) == failed + 1);
  check_value(*s, "big1", kBig);

  fs->heal_all();
  check_value(*s, "big0", kBig);
  // A read error never stops writes.
  CHECK_FALSE(s->halted());
  CHECK(put(*s, {"big2"}, kBig).ok());
  check_value(*s, "big2", kBig);
}

namespace {

// A WAL append that fails with `error`: the batch fails whole; writes stop until a reopen.
void wal_failure_halts(FaultyFs::Error error) {
  CAPTURE(static_cast<int>(error));
  TempDir dir;
  auto fs = FaultyFs::make();
  auto s = open_store(dir.path, fs);
  REQUIRE(put(*s, {"before"}, kBig).ok());
  const uint64_t records = s->live_records(), bytes = s->live_bytes();

  fs->fail(Op::kWrite, FaultyFs::kWal, FaultyFs::kForever, error);
  SsdStatus st = put(*s, {"x0", "x1", "x2"}, kBig);
  CHECK(st.code == (error == FaultyFs::Error::kNoSpace ? SsdStatus::Code::kNoSpace
                                                        : SsdStatus::Code::kIoError));
  CHECK(st.message.find("injected write failure") != std::string::npos);
  for (const char* k : {"x0", "x1", "x2"}) check_absent(*s, k);  // nothing of the batch
  CHECK(s->live_records() == records);
  CHECK(s->live_bytes() == bytes);
  CHECK(s->halted());
  check_value(*s, "before", kBig);  // reads go on

  // Healed, RocksDB still refuses writes (its fatal background error): resume() cannot clear
  // it, only a reopen does.
  fs->heal_all();
  CHECK_FALSE(s->resume().ok());
  CHECK(s->halted());
  CHECK_FALSE(put(*s, {"y"}, kBig).ok());
  CHECK_FALSE(s->flush().ok());
  check_value(*s, "before", kBig);

  s.reset();
  s = open_store(dir.path, fs);
  CHECK_FALSE(s->halted());
  check_value(*s, "before", kBig);
  for (const char* k : {"x0", "x1", "x2", "y"}) check_absent(*s, k);
  CHECK(s->live_records() == records);
  REQUIRE(put(*s, {"after"}, kBig).ok());
  check_value(*s, "after", kBig);
}

}  // namespace

TEST_CASE("store: a failed WAL write fails its batch whole and halts writes until a reopen") {
  wal_failure_halts(FaultyFs::Error::kIoError);  // EIO: RocksDB's fatal error
  // ENOSPC met by RocksDB itself (past write()'s free-space check): RocksDB could resume it, but
  // the store halts on any failed WAL append (see SsdStore::halted()).
  wal_failure_halts(FaultyFs::Error::kNoSpace);
}

TEST_CASE("store: a failed flush (a file write, sync, creation or read-back) halts writes; nothing "
          "acknowledged is lost") {
  struct Case {
    const char* name;
    Op op;
    unsigned files;
  };
  for (const Case& c : {Case{"blob write", Op::kWrite, FaultyFs::kBlob},
                        Case{"table write", Op::kWrite, FaultyFs::kSst},
                        Case{"file creation", Op::kCreate, FaultyFs::kBlob | FaultyFs::kSst},
                        Case{"sync", Op::kSync, FaultyFs::kAny},
                        Case{"new table read back", Op::kRead, FaultyFs::kSst}}) {
    CAPTURE(c.name);
    TempDir dir;
    auto fs = FaultyFs::make();
    auto s = open_store(dir.path, fs);
    std::vector<std::string> keys;
    for (int i = 0; i < 8; ++i) keys.push_back("k" + std::to_string(i));
    REQUIRE(put(*s, keys, kBig).ok());  // acknowledged: in the WAL and the memtable

    fs->fail(c.op, c.files);
    SsdStatus st = s->flush();
    CHECK_FALSE(st.ok());
    CHECK(st.message.find("injected") != std::string::npos);
    CHECK(fs->failed(c.op) >= 1);
    CHECK(s->halted());
    CHECK_FALSE(put(*s, {"refused"}, kBig).ok());
    for (const std::string& k : keys) check_value(*s, k, kBig);  // from the memtable

    fs->heal_all();
    CHECK_FALSE(s->resume().ok());
    s.reset();
    s = open_store(dir.path, fs);  // the WAL brings the acknowledged writes back
    CHECK_FALSE(s->halted());
    for (const std::string& k : keys) check_value(*s, k, kBig);
    check_absent(*s, "refused");
    REQUIRE(put(*s, {"after"}, kBig).ok());
    REQUIRE(s->flush().ok());
    check_value(*s, "after", kBig);
  }
}

TEST_CASE("store: RocksDB's own no-space error stops writes until it resumes, without a reopen") {
  TempDir dir;
  auto fs = FaultyFs::make();
  auto s = open_store(dir.path, fs);
  REQUIRE(put(*s, {"k0", "k1"}, kBig).ok());
  fs->fail(Op::kWrite, FaultyFs::kBlob, FaultyFs::kForever, FaultyFs::Error::kNoSpace);
  SsdStatus st = s->flush();
  CHECK(st.code == SsdStatus::Code::kNoSpace);
  CHECK_FALSE(s->halted());  // resumable
  CHECK_FALSE(put(*s, {"refused"}, kBig).ok());
  check_value(*s, "k0", kBig);

  fs->heal_all();
  // RocksDB's own recovery may be running (resume() then answers busy): a bounded wait.
  REQUIRE(ssd_fault::wait_until([&] { return s->resume().ok(); }));
  REQUIRE(put(*s, {"k2"}, kBig).ok());
  REQUIRE(s->flush().ok());
  for (const char* k : {"k0", "k1", "k2"}) check_value(*s, k, kBig);
  check_absent(*s, "refused");
}
