// Unit tests of tiering::SsdStore (the RocksDB store of the SSD tier), each in its own temporary
// directory: byte-exact round trips from 0 B to 32 MiB, batches, removal, recovery after a clean
// close and after a crash (a child process killed mid-stream), capacity drops in demotion order,
// expiry, and errors returned as statuses.
#include <doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tiering/ssd_store.h"
#include "tests/unit/ssd_test_util.h"

using namespace tiering;

using ssd_test::read_value;
using ssd_test::span_of;
using ssd_test::TempDir;

namespace {


std::string bytes_of(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}


std::unique_ptr<SsdStore> open_store(const std::string& path, uint64_t capacity = 0,
                                     bool recover = true) {
  SsdOptions o;
  o.path = path + "/db";
  o.capacity = capacity;
  o.recover = recover;
  o.write_buffer_size = 8 << 20;
  SsdStatus st;
  auto store = SsdStore::open(o, &st);
  INFO(st.message);
  REQUIRE(store != nullptr);
  return store;
}


SsdStatus put(SsdStore& s, const std::string& key, const std::string& value, int64_t exp = 0) {
  SsdBatch b;
  b.put(key, exp, span_of(value));
  return s.write(b);
}

std::map<std::string, SsdRecordInfo> scan_all(SsdStore& s, int64_t now = 0) {
  std::map<std::string, SsdRecordInfo> out;
  SsdStatus st = s.scan(now, [&](const SsdRecordInfo& r) {
    SsdRecordInfo copy = r;
    copy.key = {};
    out.emplace(std::string(r.key), copy);
    return true;
  });
  REQUIRE(st.ok());
  return out;
}

}  // namespace

TEST_CASE("values from 0 bytes to 32 MiB round-trip byte-exact, blob or not") {
  TempDir dir;
  auto s = open_store(dir.path);
  const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 65536, 1 << 20, 32 << 20};
  for (size_t n : sizes) {
    const std::string key = "k" + std::to_string(n);
    REQUIRE(put(*s, key, bytes_of(n, static_cast<uint32_t>(n))).ok());
  }
  uint64_t total = 0;
  for (size_t n : sizes) {
    const std::string key = "k" + std::to_string(n);
    auto v = read_value(*s, key);
    REQUIRE(v);
    CHECK(v->size() == n);
    CHECK(*v == bytes_of(n, static_cast<uint32_t>(n)));
    total += key.size() + n;
  }
  CHECK(s->live_records() == std::size(sizes));
  CHECK(s->live_bytes() == total);
  // Still exact once flushed to SST and blob files.
  REQUIRE(s->flush().ok());
  CHECK(read_value(*s, "k33554432") == bytes_of(32 << 20, 32 << 20));
  CHECK(read_value(*s, "k100") == bytes_of(100, 100));
}

TEST_CASE("a batch applies in order; remove and rewrite keep the counters exact") {
  TempDir dir;
  auto s = open_store(dir.path);
  const std::string a = bytes_of(5000, 1), b = bytes_of(300, 2), c = bytes_of(10, 3);
  SsdBatch batch;
  batch.put("a", 0, span_of(a));
  batch.put("b", 0, span_of(b));
  batch.remove("b");            // removed again within the batch
  batch.remove("nothing");      // absent: no effect
  batch.put("c", 0, span_of(a));
  batch.put("c", 0, span_of(c));  // the later put wins
  REQUIRE(s->write(batch).ok());
  CHECK(read_value(*s, "a") == a);
  CHECK(!read_value(*s, "b"));
  CHECK(read_value(*s, "c") == c);
  CHECK(s->live_records() == 2);
  CHECK(s->live_bytes() == 1 + a.size() + 1 + c.size());

  REQUIRE(s->remove("a").ok());
  CHECK(!read_value(*s, "a"));
  REQUIRE(s->remove("a").ok());  // removing twice is fine
  CHECK(s->live_records() == 1);
  CHECK(s->live_bytes() == 1 + c.size());
  REQUIRE(put(*s, "c", b).ok());
  CHECK(read_value(*s, "c") == b);
  CHECK(s->live_bytes() == 1 + b.size());
  CHECK(s->read("zz", [](size_t) { return std::span<std::byte>(); }, nullptr).code ==
        SsdStatus::Code::kNotFound);
}

TEST_CASE("a buffer too small is kNoMemory, not a crash") {
  TempDir dir;
  auto s = open_store(dir.path);
  REQUIRE(put(*s, "k", bytes_of(100, 1)).ok());
  size_t size = 0;
  SsdStatus st = s->read("k", [](size_t) { return std::span<std::byte>(); }, &size);
  CHECK(st.code == SsdStatus::Code::kNoMemory);
  CHECK(size == 100);
  CHECK(!st.message.empty());
}

TEST_CASE("records, expiries and counters survive close and reopen") {
  TempDir dir;
  std::map<std::string, std::string> values;
  {
    auto s = open_store(dir.path);
    for (int i = 0; i < 200; ++i) {
      const std::string key = "key:" + std::to_string(i);
      values[key] = bytes_of(static_cast<size_t>(i) * 97 % 20000, static_cast<uint32_t>(i));
      REQUIRE(put(*s, key, values[key], i % 3 == 0 ? 4'000'000'000'000 + i : 0).ok());
    }
  }
  auto s = open_store(dir.path);
  auto all = scan_all(*s);
  REQUIRE(all.size() == values.size());
  uint64_t bytes = 0;
  for (const auto& [key, value] : values) {
    const SsdRecordInfo& r = all.at(key);
    const int i = std::stoi(key.substr(4));
    CHECK(r.size == value.size());
    CHECK(r.expire_ms == (i % 3 == 0 ? 4'000'000'000'000 + i : 0));
    CHECK(read_value(*s, key) == value);
    bytes += key.size() + value.size();
  }
  CHECK(s->live_records() == values.size());
  CHECK(s->live_bytes() == bytes);
  // New records get newer sequence numbers than the recovered ones.
  uint64_t max_seq = 0;
  for (const auto& [k, r] : all) max_seq = std::max(max_seq, r.seq);
  REQUIRE(put(*s, "new", "x").ok());
  CHECK(scan_all(*s).at("new").seq > max_seq);
}

TEST_CASE("recover = false wipes the store") {
  TempDir dir;
  { REQUIRE(put(*open_store(dir.path), "k", "v").ok()); }
  auto s = open_store(dir.path, 0, /*recover=*/false);
  CHECK(!read_value(*s, "k"));
  CHECK(s->live_records() == 0);
}

TEST_CASE("drop_oldest removes records in demotion order, and only those allowed") {
  TempDir dir;
  auto s = open_store(dir.path, 50 * 1024);
  const std::string v = bytes_of(1024 - 4, 7);  // key "kNNN" + value = 1 KiB a record
  for (int i = 100; i < 200; ++i) REQUIRE(put(*s, "k" + std::to_string(i), v).ok());
  REQUIRE(put(*s, "k100", v).ok());  // rewritten: now the newest
  std::vector<std::string> dropped;
  REQUIRE(s->drop_oldest(50 * 1024, SIZE_MAX,
                         [](std::string_view key) { return key != "k105"; }, &dropped).ok());
  CHECK(s->live_bytes() == 50 * 1024);
  CHECK(dropped.size() == 50);
  CHECK(dropped.front() == "k101");
  CHECK(std::find(dropped.begin(), dropped.end(), "k105") == dropped.end());
  CHECK(read_value(*s, "k105"));   // skipped: kept
  CHECK(read_value(*s, "k100"));   // rewritten late: among the newest
  CHECK(!read_value(*s, "k101"));
  CHECK(read_value(*s, "k199"));
  CHECK(scan_all(*s).size() == s->live_records());
  // max_records bounds one call.
  dropped.clear();
  REQUIRE(s->drop_oldest(0, 5, [](std::string_view) { return true; }, &dropped).ok());
  CHECK(dropped.size() == 5);
}

TEST_CASE("expired records are skipped by scan and removed by sweep_expired") {
  TempDir dir;
  auto s = open_store(dir.path);
  const int64_t now = 1'700'000'000'000;
  for (int i = 0; i < 30; ++i)
    REQUIRE(put(*s, "k" + std::to_string(i), bytes_of(5000, i), i < 10 ? now - 1 : now + 60000)
                .ok());
  REQUIRE(put(*s, "forever", "x").ok());
  uint64_t expired = 0;
  std::map<std::string, SsdRecordInfo> live;
  REQUIRE(s->scan(now, [&](const SsdRecordInfo& r) {
    live.emplace(std::string(r.key), r);
    return true;
  }, &expired).ok());
  CHECK(live.size() == 21);
  CHECK(expired == 10);
  size_t removed = 0;
  REQUIRE(s->sweep_expired(now, 4, &removed).ok());
  CHECK(removed == 4);
  REQUIRE(s->sweep_expired(now, 100, &removed).ok());
  CHECK(removed == 6);
  CHECK(s->live_records() == 21);
  CHECK(!read_value(*s, "k0"));
  CHECK(read_value(*s, "k10") == bytes_of(5000, 10));
  // set_expire moves a deadline without rewriting the value.
  SsdBatch b;
  b.set_expire("forever", now - 5);
  b.set_expire("absent", now - 5);
  REQUIRE(s->write(b).ok());
  REQUIRE(s->sweep_expired(now, 100, &removed).ok());
  CHECK(removed == 1);
  CHECK(!read_value(*s, "forever"));
  CHECK(s->live_records() == 20);
}

TEST_CASE("clear removes everything") {
  TempDir dir;
  auto s = open_store(dir.path);
  for (int i = 0; i < 50; ++i) REQUIRE(put(*s, "k" + std::to_string(i), bytes_of(9000, i)).ok());
  REQUIRE(s->clear().ok());
  CHECK(s->live_records() == 0);
  CHECK(s->live_bytes() == 0);
  CHECK(scan_all(*s).empty());
  CHECK(!read_value(*s, "k3"));
  REQUIRE(put(*s, "k3", "again").ok());
  CHECK(read_value(*s, "k3") == "again");
}

// The crash test's writer. It runs in a process of its own, started by the test below with
// STRATAKV_SSD_CRASH_DIR and STRATAKV_SSD_CRASH_FD set (a fork of this multithreaded test process
// would have no RocksDB background threads): it writes batches, reports each acknowledged one on
// the pipe, and kills itself without closing the store. Without the variables it does nothing.
TEST_CASE("ssd crash writer (helper process of the crash test)") {
  const char* dir = std::getenv("STRATAKV_SSD_CRASH_DIR");
  const char* fd_text = std::getenv("STRATAKV_SSD_CRASH_FD");
  if (dir == nullptr || fd_text == nullptr) return;
  const int fd = std::atoi(fd_text);
  SsdOptions o;
  o.path = std::string(dir) + "/db";
  o.write_buffer_size = 4 << 20;  // several flushes while it runs
  SsdStatus st;
  auto s = SsdStore::open(o, &st);
  if (!s) _exit(2);
  for (uint32_t i = 0;; ++i) {
    const std::string v = bytes_of(i % 7 == 0 ? (256 << 10) : 3000, i);
    SsdBatch b;
    b.put("k" + std::to_string(i % 64), 0, span_of(v));
    b.put("n" + std::to_string(i), 0, span_of(v));
    if (!s->write(b).ok()) _exit(3);
    if (write(fd, &i, sizeof i) != sizeof i) _exit(4);
    if (i == 400) kill(getpid(), SIGKILL);
  }
}

TEST_CASE("a crash keeps every acknowledged batch, never a torn value") {
  TempDir dir;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    setenv("STRATAKV_SSD_CRASH_DIR", dir.path.c_str(), 1);
    setenv("STRATAKV_SSD_CRASH_FD", std::to_string(fds[1]).c_str(), 1);
    execl("/proc/self/exe", "ssd_test", "--test-case=ssd crash writer*", "--no-run=0",
          static_cast<char*>(nullptr));
    _exit(5);
  }
  close(fds[1]);
  uint32_t last = 0, got = 0;
  bool any = false;
  while (read(fds[0], &got, sizeof got) == sizeof got) {
    last = got;
    any = true;
  }
  close(fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  INFO("child status " << wstatus);
  REQUIRE(WIFSIGNALED(wstatus));
  REQUIRE(any);
  auto s = open_store(dir.path);
  for (uint32_t i = 0; i <= last; ++i) {
    const std::string v = bytes_of(i % 7 == 0 ? (256 << 10) : 3000, i);
    CHECK(read_value(*s, "n" + std::to_string(i)) == v);
  }
  // Each k<j> holds the value of its last acknowledged write.
  for (uint32_t j = 0; j < 64 && j <= last; ++j) {
    uint32_t i = last - (last + 64 - j) % 64;
    CHECK(read_value(*s, "k" + std::to_string(j)) == bytes_of(i % 7 == 0 ? (256 << 10) : 3000, i));
  }
}

TEST_CASE("a value changed on disk reads as kCorruption, never as wrong bytes") {
  TempDir dir;
  const std::string v = bytes_of(256 << 10, 9);
  {
    auto s = open_store(dir.path);
    REQUIRE(put(*s, "k", v).ok());
    REQUIRE(s->flush().ok());  // the value is now in a blob file
  }
  std::string blob;
  for (const auto& e : std::filesystem::directory_iterator(dir.path + "/db"))
    if (e.path().extension() == ".blob") blob = e.path();
  REQUIRE(!blob.empty());
  {
    FILE* f = std::fopen(blob.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, 100 << 10, SEEK_SET);  // inside the value
    const int c = std::fgetc(f);
    std::fseek(f, 100 << 10, SEEK_SET);
    std::fputc(c ^ 0x5a, f);
    std::fclose(f);
  }
  auto s = open_store(dir.path);
  std::string out;
  size_t size = 0;
  SsdStatus st = s->read("k", [&](size_t n) {
    out.resize(n);
    return std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), n);
  }, &size);
  CHECK(st.code == SsdStatus::Code::kCorruption);
  CHECK(st.message.find("checksum") != std::string::npos);
}

TEST_CASE("bad options and unusable paths are statuses, not crashes") {
  TempDir dir;
  SsdOptions o;
  o.path = dir.path + "/db";
  o.compression = "brotli";
  SsdStatus st;
  CHECK(SsdStore::open(o, &st) == nullptr);
  CHECK(st.code == SsdStatus::Code::kInvalid);
  CHECK(st.message.find("brotli") != std::string::npos);

  const std::string file = dir.path + "/a-file";
  FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fclose(f);
  o.compression = "lz4";
  o.path = file + "/db";  // a directory inside a regular file
  CHECK(SsdStore::open(o, &st) == nullptr);
  CHECK(!st.ok());
  CHECK(!st.message.empty());
}

TEST_CASE("reclaim gives back the space of removed records, moving live values when it must") {
  ssd_test::TempDir dir;
  SsdOptions o;
  o.path = dir.path + "/db";
  o.write_buffer_size = 1 << 20;
  SsdStatus st;
  auto store = SsdStore::open(o, &st);
  REQUIRE(store != nullptr);
  // 8 blob files of 8 values each (one flush per file); then all but one value of each file
  // removed: no file is all dead, so only moving the live values frees the space.
  auto val = [](int i) { return std::string(64 << 10, static_cast<char>('a' + i % 26)) + std::to_string(i); };
  for (int f = 0; f < 8; ++f) {
    SsdBatch b;
    std::vector<std::string> vals;
    for (int i = f * 8; i < f * 8 + 8; ++i) vals.push_back(val(i));
    for (int i = 0; i < 8; ++i) b.put("k" + std::to_string(f * 8 + i), 0, ssd_test::span_of(vals[i]));
    REQUIRE(store->write(b).ok());
    REQUIRE(store->flush().ok());
  }
  SsdBatch rm;
  for (int i = 0; i < 64; ++i)
    if (i % 8 != 0) rm.remove("k" + std::to_string(i));
  REQUIRE(store->write(rm).ok());
  REQUIRE(store->flush().ok());
  const SsdReclaimOptions ro{150, 1 << 20};
  const uint64_t target = store->reclaim_target(ro);
  CHECK(target == store->live_bytes() * 3 / 2 + (1 << 20));
  REQUIRE(store->disk_bytes() > target);
  SsdReclaimResult r;
  st = store->reclaim(ro, &r);
  INFO(st.message);
  REQUIRE(st.ok());
  CHECK(r.ran);
  CHECK(r.rewritten_files > 0);
  CHECK(r.rewritten_bytes > 0);
  CHECK(r.freed_bytes > 2 * (64 << 10) * 8);
  // Obsolete files are deleted in RocksDB's background: give it a moment.
  for (int i = 0; i < 100 && store->disk_bytes() > target; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(store->disk_bytes() <= target);
  for (int i = 0; i < 64; ++i) {
    auto v = ssd_test::read_value(*store, "k" + std::to_string(i));
    if (i % 8 == 0) CHECK(v == val(i));
    else CHECK_FALSE(v.has_value());
  }
  // Under its target: nothing to do.
  st = store->reclaim(ro, &r);
  CHECK(st.ok());
  CHECK_FALSE(r.ran);
}
