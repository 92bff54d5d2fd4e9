// sdk_cluster_parts_test: the pure parts of the SDK's cluster mode: the slot map (with each
// slot's replicas) and the texts of -MOVED/-ASK (clients/cpp/src/slot_map.h), the choice of the
// node that serves a read (read_policy.h), the striped-value format (stripe_format.h) and
// the pool that runs a call's node parts at once (task_pool.h).
#include <doctest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "cluster/slot.h"
#include "read_policy.h"
#include "slot_map.h"
#include "stratakv/error.h"
#include "stripe_format.h"
#include "task_pool.h"

using namespace stratakv::detail;

namespace {

// A reply parsed by hiredis from RESP bytes.
struct Parsed {
  redisReply* r = nullptr;
  explicit Parsed(const std::string& resp) {
    redisReader* reader = redisReaderCreate();
    redisReaderFeed(reader, resp.data(), resp.size());
    void* out = nullptr;
    REQUIRE(redisReaderGetReply(reader, &out) == REDIS_OK);
    REQUIRE(out != nullptr);
    r = static_cast<redisReply*>(out);
    redisReaderFree(reader);
  }
  ~Parsed() { freeReplyObject(r); }
};

std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

std::string range(int first, int last, const std::string& host, int port, const std::string& id) {
  return "*3\r\n:" + std::to_string(first) + "\r\n:" + std::to_string(last) + "\r\n*4\r\n" + bulk(host) +
         ":" + std::to_string(port) + "\r\n" + bulk(id) + "*0\r\n";
}

std::span<const std::byte> bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE("CLUSTER SLOTS makes the map; -MOVED moves one slot") {
  Parsed p("*3\r\n" + range(0, 5460, "10.0.0.1", 7000, "a") + range(5461, 10922, "", 7001, "b") +
           range(10923, 16383, "10.0.0.1", 7000, "a"));
  SlotMap m = SlotMap::from_cluster_slots(p.r, "10.0.0.9", 3);
  CHECK(m.version() == 3);
  REQUIRE(m.nodes().size() == 2);
  CHECK(m.nodes()[0].address() == "10.0.0.1:7000");
  CHECK(m.nodes()[0].id == "a");
  CHECK(m.nodes()[1].address() == "10.0.0.9:7001");  // no host: the one asked
  CHECK(m.owner(0) == 0);
  CHECK(m.owner(5461) == 1);
  CHECK(m.owner(16383) == 0);
  m.set_owner(7, "10.0.0.9", 7001);
  CHECK(m.owner(7) == 1);
  m.set_owner(8, "10.0.0.3", 7002);
  CHECK(m.node_of(8)->address() == "10.0.0.3:7002");
  CHECK(m.node_of(8)->id.empty());

  SlotMap empty;
  CHECK(empty.node_of(100) == nullptr);
  SlotMap one = SlotMap::single({"h", 1, {}});
  CHECK(one.owner(0) == 0);
  CHECK(one.owner(16383) == 0);

  Parsed bad("*1\r\n*2\r\n:0\r\n:1\r\n");
  CHECK_THROWS_AS(SlotMap::from_cluster_slots(bad.r, "h", 0), stratakv::Error);
  Parsed out_of_range("*1\r\n" + range(0, 16384, "h", 1, "x"));
  CHECK_THROWS_AS(SlotMap::from_cluster_slots(out_of_range.r, "h", 0), stratakv::Error);
}

namespace {

// A CLUSTER SLOTS range with replicas: [first, last, primary, replica...], each [host, port, id].
std::string range_with(int first, int last, std::vector<std::pair<int, std::string>> nodes) {
  std::string out = "*" + std::to_string(2 + nodes.size()) + "\r\n:" + std::to_string(first) + "\r\n:" +
                    std::to_string(last) + "\r\n";
  for (const auto& [port, id] : nodes)
    out += "*3\r\n" + bulk("127.0.0.1") + ":" + std::to_string(port) + "\r\n" + bulk(id);
  return out;
}

// Shard A: slots 0-8191, primary 7000, replicas 7010 and 7011; shard B: 8192-16383, primary
// 7001, replica 7012 listed over two ranges; slot 16383 without replicas.
SlotMap two_shards() {
  Parsed p("*4\r\n" + range_with(0, 8191, {{7000, "a"}, {7010, "ar1"}, {7011, "ar2"}}) +
           range_with(8192, 9999, {{7001, "b"}, {7012, "br"}}) + range_with(10000, 16382, {{7001, "b"}, {7012, "br"}}) +
           range_with(16383, 16383, {{7001, "b"}}));
  return SlotMap::from_cluster_slots(p.r, "h", 1);
}

}  // namespace

TEST_CASE("CLUSTER SLOTS's replicas: each slot's, each node once; -MOVED forgets them") {
  SlotMap m = two_shards();
  REQUIRE(m.nodes().size() == 2);
  REQUIRE(m.replicas().size() == 3);
  CHECK(m.replicas()[0].address() == "127.0.0.1:7010");
  CHECK(m.replicas()[0].id == "ar1");
  CHECK(m.replicas()[2].address() == "127.0.0.1:7012");
  auto a = m.replicas_of(5);
  REQUIRE(a.size() == 2);
  CHECK(a[0] == 0);
  CHECK(a[1] == 1);
  for (uint16_t slot : {8192, 9999, 10000, 16382}) {
    REQUIRE(m.replicas_of(slot).size() == 1);
    CHECK(m.replicas_of(slot)[0] == 2);
  }
  CHECK(m.replicas_of(16383).empty());
  m.set_owner(5, "127.0.0.1", 7001);
  CHECK(m.replicas_of(5).empty());  // the new owner's replicas are unknown until a refresh
  CHECK(m.replicas_of(6).size() == 2);
}

TEST_CASE("ReadPolicy: primary; replicas in turn; nearest by measured round trips; failed replicas skipped") {
  using namespace std::chrono_literals;
  const SlotMap m = two_shards();
  const auto t = ReadPolicy::Clock::now();

  ReadPolicy primary(stratakv::ReadFrom::kPrimary);
  CHECK_FALSE(primary.uses_replicas());
  CHECK(primary.choose(m, 5, t) == ReadPolicy::kPrimary);

  ReadPolicy replicas(stratakv::ReadFrom::kReplicas);
  std::multiset<int> picked;
  for (int i = 0; i < 10; ++i) picked.insert(replicas.choose(m, 5, t));
  CHECK(picked.count(0) == 5);  // spread evenly over the shard's two replicas
  CHECK(picked.count(1) == 5);
  CHECK(replicas.choose(m, 9000, t) == 2);
  CHECK(replicas.choose(m, 16383, t) == ReadPolicy::kPrimary);  // no replica
  replicas.failed("127.0.0.1:7010", t);
  for (int i = 0; i < 4; ++i) CHECK(replicas.choose(m, 5, t + 1s) == 1);
  replicas.failed("127.0.0.1:7012", t);
  CHECK(replicas.choose(m, 9000, t + 1s) == ReadPolicy::kPrimary);  // its only replica is down
  CHECK(replicas.choose(m, 9000, t + ReadPolicy::kDownFor) == 2);  // tried again after a while

  ReadPolicy nearest(stratakv::ReadFrom::kNearest);
  // Unmeasured nodes are picked first (each once: the read measures it).
  CHECK(nearest.choose(m, 5, t) == 0);
  CHECK(nearest.choose(m, 5, t) == 1);
  CHECK(nearest.choose(m, 5, t) == ReadPolicy::kPrimary);
  nearest.record("127.0.0.1:7000", 100us, t);
  nearest.record("127.0.0.1:7010", 300us, t);
  nearest.record("127.0.0.1:7011", 200us, t);
  CHECK(nearest.choose(m, 5, t) == ReadPolicy::kPrimary);  // the primary is the nearest
  nearest.record("127.0.0.1:7011", 20us, t);                // 200 + (20 - 200) / 4 = 155
  CHECK(*nearest.average_us("127.0.0.1:7011") == doctest::Approx(155));
  CHECK(nearest.choose(m, 5, t) == ReadPolicy::kPrimary);
  for (int i = 0; i < 8; ++i) nearest.record("127.0.0.1:7011", 20us, t);
  CHECK(*nearest.average_us("127.0.0.1:7011") < 100);
  CHECK(nearest.choose(m, 5, t) == 1);
  // A figure older than kRefresh: that node gets the next read (once), to be measured again.
  const auto later = t + ReadPolicy::kRefresh;
  nearest.record("127.0.0.1:7000", 100us, later);
  nearest.record("127.0.0.1:7011", 20us, later);
  CHECK(nearest.choose(m, 5, later) == 0);  // 7010's figure is stale
  CHECK(nearest.choose(m, 5, later) == 1);  // then the lowest again
  nearest.failed("127.0.0.1:7011", later);
  CHECK(nearest.choose(m, 5, later) == ReadPolicy::kPrimary);  // 100 < 300, 7011 skipped
  CHECK_FALSE(nearest.average_us("127.0.0.1:7999"));
  CHECK(nearest.choose(m, 16383, later) == ReadPolicy::kPrimary);  // no replica
}

TEST_CASE("the texts of -MOVED and -ASK; CLUSTER INFO's epoch") {
  auto r = parse_redirect("MOVED 3999 127.0.0.1:6381");
  REQUIRE(r);
  CHECK_FALSE(r->ask);
  CHECK(r->slot == 3999);
  CHECK(r->address() == "127.0.0.1:6381");
  r = parse_redirect("ASK 1 [::1]:7000");
  REQUIRE(r);
  CHECK(r->ask);
  CHECK(r->host == "::1");
  r = parse_redirect("MOVED 5 :7000");  // Redis: the endpoint is the node that replied
  REQUIRE(r);
  CHECK(r->host.empty());
  for (const char* text : {"ERR x", "MOVED", "MOVED 16384 h:1", "MOVED 1 h", "MOVED 1 h:0", "MOVED x h:1",
                           "CLUSTERDOWN Hash slot not served"})
    CHECK_FALSE(parse_redirect(text));
  CHECK(cluster_epoch("cluster_state:ok\r\ncluster_current_epoch:17\r\ncluster_my_epoch:2\r\n") == 17);
  CHECK(cluster_epoch("cluster_state:ok\r\n") == 0);
}

TEST_CASE("striping: the plan, the manifest's bytes, part keys on distinct nodes") {
  CHECK(stripe::plan(8191, 4, 1).parts.empty());  // under 2 x 4 KiB: whole
  CHECK(stripe::plan(1 << 20, 1, 1).parts.empty());
  stripe::Manifest m = stripe::plan((64 << 20) + 5, 3, 0x1234);
  REQUIRE(m.parts.size() == 3);
  CHECK(m.parts[0].length % stripe::kPartAlign == 0);
  CHECK(m.parts[0].length + m.parts[1].length + m.parts[2].length == (64 << 20) + 5);
  CHECK(m.offset(2) == 2 * m.parts[0].length);
  CHECK(stripe::plan(9000, 8, 1).parts.size() == 3);  // 4 KiB parts at least
  CHECK(stripe::plan(1 << 30, 1000, 1).parts.size() == stripe::kMaxParts);

  SlotMap three;
  {
    Parsed p("*3\r\n" + range(0, 5460, "h", 1, "a") + range(5461, 10922, "h", 2, "b") +
             range(10923, 16383, "h", 3, "c"));
    three = SlotMap::from_cluster_slots(p.r, "h", 1);
  }
  std::set<uint16_t> nodes, slots;
  for (uint64_t version = 1; version <= 20; ++version) {
    stripe::Manifest v = stripe::plan(1 << 24, 3, version);
    stripe::choose_tags(v, three);
    std::set<uint16_t> of_value;
    for (size_t i = 0; i < v.parts.size(); ++i) {
      const std::string key = stripe::part_key("k{x}", v, i);
      CHECK(key.starts_with("{" + v.parts[i].tag + "}k{x}#"));
      CHECK(key.ends_with("#" + std::to_string(i)));
      of_value.insert(three.owner(cluster::key_slot(key)));
      slots.insert(cluster::key_slot(key));
    }
    CHECK(of_value.size() == 3);  // one part per node
    nodes.insert(of_value.begin(), of_value.end());
  }
  CHECK(slots.size() > 30);  // parts of many values spread over many slots

  stripe::choose_tags(m, three);
  const std::string enc = stripe::encode(m);
  CHECK(enc.size() == stripe::manifest_bytes(3));
  CHECK(stripe::may_be_manifest(enc.size()));
  auto d = stripe::decode(bytes(enc));
  REQUIRE(d);
  CHECK(d->total == m.total);
  CHECK(d->version == 0x1234);
  CHECK(d->parts[2].tag == m.parts[2].tag);
  CHECK(stripe::part_key("key", *d, 1) == stripe::part_key("key", m, 1));
  for (size_t at : {size_t{0}, size_t{9}, size_t{40}, enc.size() - 1}) {  // any flipped byte
    std::string bad = enc;
    bad[at] ^= 0x20;
    CHECK_FALSE(stripe::decode(bytes(bad)));
  }
  CHECK_FALSE(stripe::decode(bytes(enc.substr(0, enc.size() - 16))));
  CHECK_FALSE(stripe::decode(bytes(std::string(enc.size(), 'x'))));
}

TEST_CASE("striping: slices of scatter-gather pieces") {
  std::string a = "0123456789", b = "abcdef";
  std::vector<std::span<const std::byte>> pieces = {bytes(a), bytes(b)};
  auto s = stripe::slice(std::span<const std::span<const std::byte>>(pieces), 8, 5);
  REQUIRE(s.size() == 2);
  CHECK(std::string(reinterpret_cast<const char*>(s[0].data()), s[0].size()) == "89");
  CHECK(std::string(reinterpret_cast<const char*>(s[1].data()), s[1].size()) == "abc");
  CHECK(stripe::slice(std::span<const std::span<const std::byte>>(pieces), 16, 0).empty());
}

TEST_CASE("the task pool runs every index once, callers in parallel, nested runs too") {
  TaskPool pool(3);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{100}}) {
    std::vector<std::atomic<int>> hits(n);
    pool.run(n, [&](size_t i) { ++hits[i]; });
    for (auto& h : hits) CHECK(h == 1);
  }
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int k = 0; k < 50; ++k)
        pool.run(5, [&](size_t) { pool.run(3, [&](size_t) { ++total; }); });
    });
  for (auto& t : callers) t.join();
  CHECK(total == 4 * 50 * 5 * 3);
}
