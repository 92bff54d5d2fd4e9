// sdk_cluster_test: libstratakv on a cluster of three real stratakv-server processes (a static
// topology file, docs/cluster.md), through the C++ API: batches split by node byte-exact with
// a Result per key, striped values, prefix lookups across nodes with leases, many threads.
// The Python tests (test_sdk_cluster.py) cover redirects and per-node accounting in depth.
#include <doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "server_process.h"
#include "sdk_test_util.h"

namespace {

using sdktest::ServerProcess;
using stratakv::Client;
using stratakv::ConstBytes;
using stratakv::MutableBytes;
using stratakv::Result;

constexpr size_t MiB = size_t{1} << 20;

// Three primaries, slots split evenly, each in its own directory (its node id file).
class Cluster {
 public:
  Cluster() {
    char tmpl[] = "/tmp/stratakv-sdk-cluster-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    const std::string topology = dir_ + "/topology.json";
    std::vector<int> ports;
    for (int i = 0; i < 3; ++i) ports.push_back(ServerProcess::free_port());
    std::ofstream f(topology);
    f << R"({"format":1,"version":1,"name":"sdk","migrations":[],"nodes":[)";
    for (int i = 0; i < 3; ++i)
      f << (i ? "," : "") << R"({"id":")" << id(i) << R"(","host":"127.0.0.1","port":)" << ports[i]
        << R"(,"tls_port":0,"unix_socket":"","host_id":"test-host"})";
    f << R"(],"shards":[)";
    const int bounds[4] = {0, 5462, 10923, 16384};
    for (int i = 0; i < 3; ++i)
      f << (i ? "," : "") << R"({"id":")" << id(10 + i) << R"(","slots":[[)" << bounds[i] << ","
        << bounds[i + 1] - 1 << R"(]],"primary":")" << id(i) << R"(","replicas":[],"primary_epoch":1})";
    f << "]}";
    f.close();
    for (int i = 0; i < 3; ++i) {
      const std::string node_dir = dir_ + "/node" + std::to_string(i);
      std::filesystem::create_directories(node_dir);
      nodes_.push_back(std::make_unique<ServerProcess>(
          std::vector<std::string>{"--cluster-enabled", "yes", "--cluster.topology-file", topology,
                                   "--dir", node_dir},
          "", ports[i]));
    }
  }
  ~Cluster() {
    nodes_.clear();
    std::filesystem::remove_all(dir_);
  }

  std::string url() const { return "redis+cluster://127.0.0.1:" + std::to_string(nodes_[1]->port()); }
  int port(int i) const { return nodes_[static_cast<size_t>(i)]->port(); }

 private:
  static std::string id(int i) {
    std::string s(40, '0');
    const std::string n = std::to_string(i + 1);
    return s.replace(40 - n.size(), n.size(), n);
  }
  std::string dir_;
  std::vector<std::unique_ptr<ServerProcess>> nodes_;
};

Cluster& cluster() {
  static Cluster c;
  return c;
}

int64_t fastpath_field(int port, const std::string& field) {
  sdktest::Redis r(port);
  return std::stoll(r.info_field("fastpath", field));
}

}  // namespace

TEST_CASE("cluster: batches split by node, byte-exact, one Result per key") {
  Client kv(cluster().url());
  CHECK(kv.cluster());
  CHECK(kv.transport() == "shm");
  constexpr size_t n = 600;
  std::vector<std::string> names, values;
  for (size_t i = 0; i < n; ++i) {
    names.push_back("cpp:blk:" + std::to_string(i));
    values.push_back(sdktest::pattern(100 + i * 97 % 20000, i));
  }
  std::vector<std::string_view> keys(names.begin(), names.end());
  std::vector<ConstBytes> in;
  for (const std::string& v : values) in.push_back(stratakv::as_bytes(v));
  for (const Result& r : kv.batch_put(keys, in)) CHECK(r.ok());
  // Half into registered memory, half into plain memory.
  stratakv::Buffer buf = kv.alloc_buffer(n * 20100);
  std::vector<std::string> plain(n);
  std::vector<MutableBytes> out;
  for (size_t i = 0; i < n; ++i) {
    if (i % 2) {
      out.push_back(buf.span().subspan(i * 20100, 20100));
    } else {
      plain[i].resize(20100);
      out.push_back(sdktest::bytes_of(plain[i]));
    }
  }
  const std::vector<Result> got = kv.batch_get_into(keys, out);
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(got[i].ok());
    CHECK(got[i].length == values[i].size());
    CHECK(sdktest::same(out[i].first(values[i].size()), stratakv::as_bytes(values[i])));
  }
  CHECK(kv.get(keys[5]) == values[5]);
  CHECK(kv.batch_exists(std::vector<std::string_view>{keys[0], "cpp:none", keys[1]}) ==
        std::vector<bool>{true, false, true});
  CHECK(kv.batch_remove(std::span(keys).first(50)) == 50);
  CHECK_FALSE(kv.exists(keys[0]));
}

TEST_CASE("cluster: a striped value over the shards; a missing part is a miss") {
  Client kv(cluster().url());
  std::string big = sdktest::pattern(32 * MiB + 3, 32);
  CHECK(kv.put("cpp:big", stratakv::as_bytes(big), stratakv::PutOptions{.stripes = 3}));
  std::optional<std::string> back = kv.get("cpp:big");
  REQUIRE(back);
  CHECK(*back == big);
  std::string into(big.size() + 100, '\0');
  CHECK(kv.get_into("cpp:big", sdktest::bytes_of(into)) == big.size());
  CHECK(into.compare(0, big.size(), big) == 0);
  // Find a part (its key names the value's) on some node and drop it.
  bool dropped = false;
  for (int i = 0; i < 3 && !dropped; ++i) {
    sdktest::Redis r(cluster().port(i));
    auto keys = r.cmd({"KEYS", "{*}cpp:big#*"});
    if (keys->elements > 0) {
      r.cmd({"DEL", std::string(keys->element[0]->str, keys->element[0]->len)});
      dropped = true;
    }
  }
  REQUIRE(dropped);
  CHECK_FALSE(kv.get("cpp:big"));
  CHECK_FALSE(kv.get_into("cpp:big", sdktest::bytes_of(into)));
}

TEST_CASE("cluster: prefix lookups join the nodes and lease on each") {
  Client kv(cluster().url());
  std::vector<std::string> names;
  for (int i = 0; i < 30; ++i) names.push_back("cpp:chain:" + std::to_string(i));
  std::vector<std::string_view> chain(names.begin(), names.end());
  std::vector<ConstBytes> vals(chain.size(), stratakv::as_bytes("v"));
  for (const Result& r : kv.batch_put(chain, vals)) CHECK(r.ok());
  CHECK(kv.prefix_match(chain) == 30);
  CHECK(kv.remove(chain[17]));
  CHECK(kv.prefix_match(chain, 10000) == 17);
  int64_t leased = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t n = fastpath_field(cluster().port(i), "leased_keys");
    CHECK(n > 0);  // 17 keys over 3 nodes: each node has some
    leased += n;
  }
  CHECK(leased >= 17);
  CHECK(kv.unpin(chain) == static_cast<size_t>(leased));
}

TEST_CASE("cluster: many threads share one client") {
  Client kv(cluster().url(), {.max_connections = 4});
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        std::vector<std::string> names, values;
        for (int i = 0; i < 40; ++i) {
          names.push_back("cpp:mt:" + std::to_string(t) + ":" + std::to_string(i));
          values.push_back(sdktest::pattern(1000 + i, static_cast<uint64_t>(t * 1000 + round * 40 + i)));
        }
        std::vector<std::string_view> keys(names.begin(), names.end());
        std::vector<ConstBytes> in;
        for (const std::string& v : values) in.push_back(stratakv::as_bytes(v));
        for (const Result& r : kv.batch_put(keys, in)) bad += !r.ok();
        std::vector<std::string> out(keys.size(), std::string(2000, '\0'));
        std::vector<MutableBytes> dsts;
        for (std::string& o : out) dsts.push_back(sdktest::bytes_of(o));
        const std::vector<Result> got = kv.batch_get_into(keys, dsts);
        for (size_t i = 0; i < keys.size(); ++i)
          bad += !got[i].ok() || out[i].compare(0, values[i].size(), values[i]) != 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(bad == 0);
}
