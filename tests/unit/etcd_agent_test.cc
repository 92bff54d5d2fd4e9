// TopologyAgent (cluster/topology_agent.h) end to end against a real etcd 3.4
// (tests/unit/etcd_process.h): registration under a lease, topology versions applied, ignored
// and saved, an etcd outage, a restart from the saved copy, re-registration.
#include <doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/topology_agent.h"
#include "etcd_process.h"

using namespace cluster;
using etcd_test::EtcdProcess;
using etcd_test::eventually;

namespace {

const std::string kSelf(40, 'a');
const std::string kShard(40, '1');
const std::string kPrefix = "/stratakv/test";

// One node (this one) owning every slot, at `version`.
Topology topology(uint64_t version) {
  Topology t;
  t.version = version;
  t.name = "test";
  t.nodes = {{kSelf, "127.0.0.1", 7000, 0, "", "h1"}};
  t.shards = {{kShard, {{0, 16383}}, kSelf, {}, 1}};
  return t;
}

// An agent with what it published and logged, and a scratch directory for its saved copy.
struct Harness {
  std::string dir;
  std::mutex mu;
  std::vector<uint64_t> published;
  std::vector<std::string> lines;
  AgentOptions options;

  explicit Harness(const EtcdProcess& etcd) {
    char tmpl[] = "/tmp/stratakv-agent-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    options.etcd.endpoints = {etcd.endpoint()};
    options.etcd.timeout = std::chrono::milliseconds(1000);
    options.prefix = kPrefix + "/";
    options.self.address = {kSelf, "127.0.0.1", 7000, 0, "", "h1"};
    options.self.role = "none";
    options.lease_ttl_s = 2;
    options.saved_path = dir + "/topology.json";
    options.log = [this](std::string_view line) {  // STRATAKV_AGENT_LOG=1 shows them
      std::lock_guard lock(mu);
      lines.emplace_back(line);
      if (std::getenv("STRATAKV_AGENT_LOG")) std::fprintf(stderr, "%s\n", lines.back().c_str());
    };
  }
  ~Harness() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  std::unique_ptr<TopologyAgent> make() {
    return std::make_unique<TopologyAgent>(options, [this](std::shared_ptr<const Topology> t) {
      std::lock_guard lock(mu);
      published.push_back(t->version);
    });
  }
  std::vector<uint64_t> versions() {
    std::lock_guard lock(mu);
    return published;
  }
  bool logged(const std::string& needle) {
    std::lock_guard lock(mu);
    for (const std::string& l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

// The agent's record in etcd, when it is there under the agent's current lease.
std::optional<NodeRecord> registered(EtcdClient& c, const TopologyAgent& agent) {
  const auto kv = c.get(agent.node_key());
  const int64_t lease = agent.status().lease_id;
  if (!kv || lease == 0 || kv->lease != lease) return std::nullopt;
  return decode_node_record(kv->value);
}

// Writes `t` over the topology key with a CAS on what is there now.
void write(EtcdClient& c, const std::string& value) {
  const auto kv = c.get(kPrefix + "/topology");
  REQUIRE(c.compare_and_swap(kPrefix + "/topology", kv ? kv->mod_revision : 0, value));
}

}  // namespace

TEST_CASE("agent: registers under a lease, applies newer topologies only, saves them") {
  EtcdProcess etcd;
  EtcdClient c({{etcd.endpoint()}});
  Harness h(etcd);
  auto agent = h.make();
  CHECK(agent->topology_key() == kPrefix + "/topology");
  CHECK(agent->node_key() == kPrefix + "/nodes/" + kSelf);
  agent->start();
  CHECK(agent->current() == nullptr);  // no saved copy, nothing in etcd yet

  REQUIRE(eventually([&] { return registered(c, *agent).has_value() && agent->status().etcd_connected; }));
  CHECK(registered(c, *agent)->address == h.options.self.address);
  CHECK(registered(c, *agent)->role == "none");
  CHECK(agent->status().last_contact_ms >= 0);
  CHECK(agent->status().lease_renewed_ms >= 0);
  CHECK(agent->status().saved_age_s == -1);

  write(c, encode(topology(1)));
  REQUIRE(eventually([&] { return agent->status().version == 1; }));
  CHECK(*agent->current() == topology(1));
  CHECK(load_topology_file(h.options.saved_path) == topology(1));
  CHECK(agent->status().saved_age_s >= 0);
  REQUIRE(eventually([&] {  // the record follows the node's role
    auto r = registered(c, *agent);
    return r && r->role == "primary" && r->shard == kShard;
  }));

  write(c, encode(topology(3)));
  write(c, encode(topology(2)));  // older: ignored
  write(c, "{\"format\":1,\"version\":9}");  // does not decode: ignored
  write(c, encode(topology(5)));
  REQUIRE(eventually([&] { return agent->status().version == 5; }));
  CHECK(h.versions() == std::vector<uint64_t>{1, 3, 5});
  CHECK(load_topology_file(h.options.saved_path).version == 5);
  CHECK(h.logged("event=topology_ignored version=2 current=3"));
  CHECK(h.logged("event=topology_rejected"));

  agent->set_progress(5, 1234);
  REQUIRE(eventually([&] {
    auto r = registered(c, *agent);
    return r && r->topology_version == 5 && r->repl_offset == 1234;
  }));

  // A lease that is gone (here revoked behind the agent's back) is replaced.
  const int64_t old_lease = agent->status().lease_id;
  REQUIRE(c.lease_revoke(old_lease));
  REQUIRE(eventually([&] {
    auto r = registered(c, *agent);
    return r && agent->status().lease_id != old_lease && r->topology_version == 5;
  }));
  CHECK(h.logged("event=lease_lost"));

  agent->stop();
  CHECK(agent->status().lease_id == 0);
  CHECK(eventually([&] { return !c.get(kPrefix + "/nodes/" + kSelf).has_value(); },
                   std::chrono::seconds(h.options.lease_ttl_s + 5)));
}

TEST_CASE("agent: keeps its topology while etcd is down, restarts from the saved copy, reconnects") {
  EtcdProcess etcd;
  EtcdClient c({{etcd.endpoint()}});
  Harness h(etcd);
  {
    auto agent = h.make();
    agent->start();
    write(c, encode(topology(4)));
    REQUIRE(eventually([&] { return agent->status().version == 4 && agent->status().etcd_connected; }));

    etcd.kill();
    REQUIRE(eventually([&] { return !agent->status().etcd_connected; }));
    CHECK(agent->current()->version == 4);
    CHECK_FALSE(agent->status().last_error.empty());
    CHECK(agent->status().last_contact_ms >= 0);
    agent->stop();
  }

  auto agent = h.make();  // a node restarted while etcd is down
  agent->start();
  CHECK(h.versions() == std::vector<uint64_t>{4, 4});  // published from start() at once
  REQUIRE(agent->current() != nullptr);
  CHECK(*agent->current() == topology(4));
  CHECK(agent->status().saved_age_s >= 0);
  CHECK_FALSE(agent->status().etcd_connected);
  CHECK(h.logged("event=saved_topology_loaded version=4"));

  etcd.start();
  REQUIRE(eventually([&] {
    try {
      return agent->status().etcd_connected && registered(c, *agent).has_value();
    } catch (const EtcdUnavailable&) {
      return false;
    }
  }));
  CHECK(registered(c, *agent)->role == "primary");
  write(c, encode(topology(6)));
  REQUIRE(eventually([&] { return agent->status().version == 6; }));
  CHECK(load_topology_file(h.options.saved_path).version == 6);
  agent->stop();
}

TEST_CASE("agent: rejects bad options") {
  AgentOptions o;
  o.etcd.endpoints = {"http://127.0.0.1:1"};
  o.prefix = "/p";
  o.self.address.id = kSelf;
  CHECK_NOTHROW(TopologyAgent(o, nullptr));
  o.prefix = "/";
  CHECK_THROWS_AS(TopologyAgent(o, nullptr), std::invalid_argument);
  o.prefix = "/p";
  o.self.address.id = "short";
  CHECK_THROWS_AS(TopologyAgent(o, nullptr), std::invalid_argument);
  o.self.address.id = kSelf;
  o.lease_ttl_s = 0;
  CHECK_THROWS_AS(TopologyAgent(o, nullptr), std::invalid_argument);
  o.lease_ttl_s = 1;
  o.etcd.endpoints.clear();
  CHECK_THROWS_AS(TopologyAgent(o, nullptr), std::invalid_argument);
}
