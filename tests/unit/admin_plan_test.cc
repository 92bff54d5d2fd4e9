// Unit tests of stratakv-admin's topology changes (clients/admin/plan.h): each result is a valid
// topology one version higher, and what the cluster does not allow is refused with a message.
#include <doctest.h>

#include <string>

#include "clients/admin/plan.h"

using admin::PlanError;

namespace {

cluster::NodeAddress node(int i, const std::string& host_id = "h") {
  cluster::NodeAddress n;
  n.id = std::string(39, '0') + static_cast<char>('a' + i);
  n.host = "127.0.0.1";
  n.port = static_cast<uint16_t>(7000 + i);
  n.host_id = host_id;
  return n;
}

}  // namespace

TEST_CASE("create: shards in address order, slots split evenly, replicas on other hosts") {
  std::vector<cluster::NodeAddress> nodes = {node(3, "b"), node(0, "a"), node(1, "a"),
                                             node(2, "b")};
  const cluster::Topology t = admin::create(nodes, 2, 1, "kv");
  CHECK(t.version == 1);
  CHECK(t.name == "kv");
  REQUIRE(t.shards.size() == 2);
  CHECK(t.shards[0].primary == node(0).id);  // lowest port first
  CHECK(t.shards[1].primary == node(1).id);
  CHECK(t.shards[0].slots == std::vector<cluster::SlotRange>{{0, 8191}});
  CHECK(t.shards[1].slots == std::vector<cluster::SlotRange>{{8192, 16383}});
  // Primaries on host a: their replicas come from host b.
  CHECK(t.nodes.size() == 4);
  for (const cluster::Shard& s : t.shards) {
    REQUIRE(s.replicas.size() == 1);
    CHECK(t.node(s.replicas[0])->host_id == "b");
  }
  CHECK_THROWS_AS(admin::create(nodes, 3, 1, "kv"), PlanError);  // 6 nodes needed
  CHECK_THROWS_AS(admin::create(nodes, 0, 0, "kv"), PlanError);
  CHECK(admin::create(nodes, 4, 0, "kv").shards.size() == 4);
}

TEST_CASE("add-node: a new empty shard, or a replica of a shard named several ways") {
  const cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  const cluster::Topology a = admin::add_node(t, node(2), "");
  CHECK(a.version == 2);
  REQUIRE(a.shards.size() == 3);
  CHECK(a.shards[2].primary == node(2).id);
  CHECK(a.shards[2].slots.empty());
  const cluster::Topology b = admin::add_node(t, node(2), "127.0.0.1:7001");
  CHECK(b.shards[1].replicas == std::vector<std::string>{node(2).id});
  CHECK(admin::add_node(t, node(2), t.shards[0].id).shards[0].replicas.size() == 1);
  CHECK(admin::add_node(t, node(2), node(0).id).shards[0].replicas.size() == 1);
  CHECK_THROWS_AS(admin::add_node(t, node(0), ""), PlanError);  // in it already
  CHECK_THROWS_AS(admin::add_node(t, node(2), "127.0.0.1:9999"), PlanError);
}

TEST_CASE("remove-node: replicas, and primaries of empty shards only") {
  cluster::Topology t = admin::create({node(0), node(1), node(2), node(3)}, 2, 1, "kv");
  const std::string replica = t.shards[0].replicas[0];
  const cluster::Topology r = admin::remove_node(t, replica);
  CHECK(r.shards[0].replicas.empty());
  CHECK(r.node(replica) == nullptr);
  CHECK_THROWS_AS(admin::remove_node(t, t.shards[0].primary), PlanError);  // has slots
  cluster::Topology grown = admin::add_node(r, node(5), "");
  const cluster::Topology gone = admin::remove_node(grown, "127.0.0.1:7005");
  CHECK(gone.shards.size() == 2);
  CHECK(gone.version == grown.version + 1);
  CHECK_THROWS_AS(admin::remove_node(t, "127.0.0.1:9999"), PlanError);
}

TEST_CASE("assign-slots: ranges split and merge, the result stays valid") {
  const cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  const cluster::Topology a = admin::assign_slots(t, 100, 200, "127.0.0.1:7001");
  CHECK(a.shards[0].slots == std::vector<cluster::SlotRange>{{0, 99}, {201, 8191}});
  CHECK(a.shards[1].slots == std::vector<cluster::SlotRange>{{100, 200}, {8192, 16383}});
  const cluster::Topology back = admin::assign_slots(a, 100, 200, "127.0.0.1:7000");
  CHECK(back.shards[0].slots == std::vector<cluster::SlotRange>{{0, 8191}});
  CHECK(back.version == 3);
  const cluster::Topology all = admin::assign_slots(t, 0, 16383, t.shards[1].id);
  CHECK(all.shards[0].slots.empty());
  CHECK(cluster::SlotMap(all).assigned() == 16384);
  CHECK_THROWS_AS(admin::assign_slots(t, 5, 4, t.shards[1].id), PlanError);
  CHECK_THROWS_AS(admin::assign_slots(t, 0, 1, "nobody"), PlanError);
}

TEST_CASE("parse_range") {
  CHECK(admin::parse_range("7") == cluster::SlotRange{7, 7});
  CHECK(admin::parse_range("0-16383") == cluster::SlotRange{0, 16383});
  for (const char* bad : {"", "-", "16384", "5-4", "a", "1-", "-1", "1-2-3", "99999999999"})
    CHECK_THROWS_AS(admin::parse_range(bad), PlanError);
}
