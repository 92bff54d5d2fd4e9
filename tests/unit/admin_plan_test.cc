// Unit tests of stratakv-admin's topology changes (clients/admin/plan.h): each result is a valid
// topology one version higher, and what the cluster does not allow is refused with a message.
// Also the migrations it starts and cancels, and the rebalance planner's moves.
#include <doctest.h>

#include <algorithm>
#include <random>
#include <set>
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

using Ranges = std::vector<cluster::SlotRange>;

// Plays the nodes: each move started by start_migration and completed by cluster::move_slots,
// as move-slots and the source's primary do. Checks every step stays valid.
cluster::Topology apply(cluster::Topology t, const std::vector<admin::Move>& moves) {
  int i = 0;
  for (const admin::Move& m : moves) {
    const std::string id = "move-" + std::to_string(i++);
    t = admin::start_migration(t, m.source_shard, m.target_shard, m.slots, id);
    std::string error;
    REQUIRE_MESSAGE(cluster::move_slots(t, id, &error), error);
    cluster::validate(t);
  }
  return t;
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

TEST_CASE("start_migration: appends a streaming migration of sorted, merged ranges") {
  const cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  const cluster::Topology m =
      admin::start_migration(t, "127.0.0.1:7000", t.shards[1].id, {{10, 19}, {0, 9}, {30, 30}}, "m1");
  CHECK(m.version == t.version + 1);
  CHECK(m.shards == t.shards);  // the source serves the slots until the node side is done
  REQUIRE(m.migrations.size() == 1);
  CHECK(m.migrations[0] == cluster::Migration{"m1", {{0, 19}, {30, 30}}, t.shards[0].id,
                                              t.shards[1].id, "streaming"});
  // A disjoint range may start beside it; the finished ones never block.
  const cluster::Topology two = admin::start_migration(m, node(0).id, node(1).id, {{20, 29}}, "m2");
  CHECK(two.migrations.size() == 2);
  cluster::Topology finished = m;
  finished.migrations[0].state = "failed";
  CHECK(admin::start_migration(finished, node(0).id, node(1).id, {{0, 9}}, "m3").migrations.size() == 2);
}

TEST_CASE("start_migration: refusals name what is wrong") {
  cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  t = admin::add_node(t, node(2), "");  // an empty shard
  CHECK_THROWS_WITH_AS(admin::start_migration(t, node(0).id, t.shards[0].id, {{0, 9}}, "m"),
                       doctest::Contains("same shard"), PlanError);
  CHECK_THROWS_WITH_AS(admin::start_migration(t, node(0).id, node(1).id, {{8190, 8193}}, "m"),
                       doctest::Contains(("slot 8192 is not served by shard " +
                                          t.shards[0].id.substr(0, 8) + " (127.0.0.1:7000)")
                                             .c_str()),
                       PlanError);
  CHECK_THROWS_WITH_AS(admin::start_migration(t, node(2).id, node(1).id, {{0, 0}}, "m"),
                       doctest::Contains("slot 0 is not served"), PlanError);
  CHECK_THROWS_WITH_AS(admin::start_migration(t, node(0).id, "127.0.0.1:9999", {{0, 0}}, "m"),
                       doctest::Contains("no shard 127.0.0.1:9999"), PlanError);
  CHECK_THROWS_WITH_AS(admin::start_migration(t, node(0).id, node(1).id, {}, "m"),
                       doctest::Contains("no slots"), PlanError);
  cluster::Topology gap = admin::assign_slots(t, 0, 0, node(1).id);
  gap.shards[1].slots.erase(gap.shards[1].slots.begin());  // slot 0: nobody's
  CHECK_THROWS_WITH_AS(admin::start_migration(gap, node(1).id, node(0).id, {{0, 0}}, "m"),
                       doctest::Contains("no shard serves it"), PlanError);
  cluster::Topology headless = t;
  headless.shards[2].primary.clear();
  CHECK_THROWS_WITH_AS(admin::start_migration(headless, node(0).id, headless.shards[2].id, {{0, 9}}, "m"),
                       doctest::Contains("has no primary to take the slots"), PlanError);
  headless = t;
  headless.shards[0].primary.clear();
  CHECK_THROWS_WITH_AS(admin::start_migration(headless, headless.shards[0].id, node(1).id, {{0, 9}}, "m"),
                       doctest::Contains("has no primary to send"), PlanError);
  const cluster::Topology running = admin::start_migration(t, node(0).id, node(2).id, {{100, 199}}, "abcdef0123");
  CHECK_THROWS_WITH_AS(admin::start_migration(running, node(0).id, node(1).id, {{0, 9}, {150, 300}}, "m"),
                       doctest::Contains("slots 150-300 overlap migration abcdef01 (100-199, streaming)"),
                       PlanError);
}

TEST_CASE("writes keep the 16 most recent finished migrations") {
  cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  for (int i = 0; i < 20; ++i) {
    t = admin::start_migration(t, node(0).id, node(1).id, {{0, 9}}, "m" + std::to_string(i));
    t.migrations.back().state = "failed";
  }
  CHECK(t.migrations.size() == 17);  // pruned before each append
  t = admin::start_migration(t, node(0).id, node(1).id, {{0, 9}}, "last");
  REQUIRE(t.migrations.size() == 17);
  CHECK(t.migrations.front().id == "m4");
  CHECK(t.migrations.back().id == "last");
  t.migrations.back().state = "done";  // 17 finished now
  t = admin::assign_slots(t, 5000, 5000, node(1).id);  // any write prunes
  REQUIRE(t.migrations.size() == 16);
  CHECK(t.migrations.front().id == "m5");
}

TEST_CASE("cancel_migration and find_migration: by id, prefix, or the only running one") {
  cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  CHECK_THROWS_WITH_AS(admin::cancel_migration(t, ""), doctest::Contains("no migration is running"),
                       PlanError);
  t = admin::start_migration(t, node(0).id, node(1).id, {{0, 9}}, "aaaa1111");
  const cluster::Topology c = admin::cancel_migration(t, "");
  CHECK(c.version == t.version + 1);
  CHECK(c.migrations[0].state == "cancelled");
  CHECK(c.shards == t.shards);
  CHECK_THROWS_WITH_AS(admin::cancel_migration(c, "aaaa"), doctest::Contains("cancelled already"),
                       PlanError);
  t = admin::start_migration(t, node(0).id, node(1).id, {{10, 19}}, "aaaa2222");
  CHECK_THROWS_WITH_AS(admin::cancel_migration(t, ""), doctest::Contains("2 migrations are running"),
                       PlanError);
  CHECK_THROWS_WITH_AS(admin::cancel_migration(t, "aaaa"), doctest::Contains("several migrations"),
                       PlanError);
  CHECK_THROWS_WITH_AS(admin::cancel_migration(t, "bbbb"), doctest::Contains("no migration bbbb"),
                       PlanError);
  CHECK(admin::find_migration(t, "aaaa2") == 1);
  CHECK(admin::find_migration(t, "aaaa1111") == 0);
  const cluster::Topology one = admin::cancel_migration(t, "aaaa2");
  CHECK(one.migrations[0].state == "streaming");
  CHECK(one.migrations[1].state == "cancelled");
  CHECK(admin::find_migration(one, "") == 0);  // the only running one now
}

TEST_CASE("running migrations block assign-slots over them and removing their shards") {
  cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  t = admin::add_node(t, node(2), "");
  t = admin::start_migration(t, node(0).id, node(2).id, {{0, 99}}, "m1");
  CHECK_THROWS_WITH_AS(admin::assign_slots(t, 50, 50, node(1).id), doctest::Contains("migration m1"),
                       PlanError);
  CHECK_NOTHROW(admin::assign_slots(t, 100, 100, node(1).id));
  CHECK_THROWS_WITH_AS(admin::remove_node(t, node(2).id), doctest::Contains("migration m1"), PlanError);
  // Finished, the migration goes with the shard it names.
  t.migrations[0].state = "cancelled";
  const cluster::Topology gone = admin::remove_node(t, node(2).id);
  CHECK(gone.shards.size() == 2);
  CHECK(gone.migrations.empty());
}

TEST_CASE("rebalance: balanced already, no moves") {
  const cluster::Topology t = admin::create({node(0), node(1), node(2)}, 3, 0, "kv");
  CHECK(admin::plan_rebalance(t, {}).empty());
  // Shares differ by at most one slot: the extra ones stay where they are.
  const cluster::Topology shifted = admin::assign_slots(t, 5461, 5461, node(1).id);  // 5461, 5462, 5461
  CHECK(admin::plan_rebalance(shifted, {}).empty());
  CHECK(admin::plan_rebalance(admin::create({node(0)}, 1, 0, "kv"), {}).empty());
}

TEST_CASE("rebalance: three shards and an empty one become four of 4096") {
  cluster::Topology t = admin::create({node(0), node(1), node(2)}, 3, 0, "kv");
  t = admin::add_node(t, node(3), "");
  const std::vector<admin::Move> moves = admin::plan_rebalance(t, {});
  REQUIRE(moves.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(moves[i].source_shard == t.shards[i].id);
    CHECK(moves[i].target_shard == t.shards[3].id);
  }
  // The edges: the first shard's top meets the second's bottom in one range of the new shard.
  CHECK(moves[0].slots == Ranges{{4096, 5461}});
  CHECK(moves[1].slots == Ranges{{5462, 6826}});
  CHECK(moves[2].slots == Ranges{{10923, 12287}});
  const cluster::Topology after = apply(t, moves);
  for (const cluster::Shard& s : after.shards) CHECK(cluster::count_slots(s.slots) == 4096);
  CHECK(after.shards[0].slots == Ranges{{0, 4095}});
  CHECK(after.shards[1].slots == Ranges{{6827, 10922}});
  CHECK(after.shards[2].slots == Ranges{{12288, 16383}});
  CHECK(after.shards[3].slots == Ranges{{4096, 6826}, {10923, 12287}});
  CHECK(admin::plan_rebalance(after, {}).empty());
}

TEST_CASE("rebalance: four shards become three when one is excluded") {
  const cluster::Topology t = admin::create({node(0), node(1), node(2), node(3)}, 4, 0, "kv");
  const std::vector<admin::Move> moves = admin::plan_rebalance(t, {"127.0.0.1:7001"});
  REQUIRE(moves.size() == 3);
  for (const admin::Move& m : moves) CHECK(m.source_shard == t.shards[1].id);
  CHECK(moves[0] == admin::Move{t.shards[1].id, t.shards[0].id, {{4096, 5461}}});
  CHECK(moves[1] == admin::Move{t.shards[1].id, t.shards[2].id, {{6827, 8191}}});
  CHECK(moves[2] == admin::Move{t.shards[1].id, t.shards[3].id, {{5462, 6826}}});
  const cluster::Topology after = apply(t, moves);
  CHECK(after.shards[1].slots.empty());
  CHECK(after.shards[0].slots == Ranges{{0, 5461}});
  CHECK(after.shards[2].slots == Ranges{{6827, 12287}});
  CHECK(cluster::count_slots(after.shards[3].slots) == 5461);
  CHECK(admin::plan_rebalance(after, {t.shards[1].id}).empty());
  CHECK(admin::remove_node(after, node(1).id).shards.size() == 3);  // now it can leave
}

TEST_CASE("rebalance: uneven starts") {
  cluster::Topology t = admin::create({node(0), node(1)}, 2, 0, "kv");
  t = admin::assign_slots(t, 8192, 9999, node(0).id);  // 10000 and 6384
  t = admin::add_node(t, node(2), "");
  std::vector<admin::Move> moves = admin::plan_rebalance(t, {});
  // The largest keeps the extra slot: 5462, 5461, 5461. The new shard takes one range.
  REQUIRE(moves.size() == 2);
  CHECK(moves[0] == admin::Move{t.shards[0].id, t.shards[2].id, {{5462, 9999}}});
  CHECK(moves[1] == admin::Move{t.shards[1].id, t.shards[2].id, {{10000, 10922}}});
  cluster::Topology after = apply(t, moves);
  CHECK(after.shards[2].slots == Ranges{{5462, 10922}});

  // Shards without a primary keep their slots and take no part; excluding one is refused.
  t = admin::create({node(0), node(1), node(2)}, 3, 0, "kv");
  t.shards[2].primary.clear();
  t = admin::add_node(t, node(3), "");
  moves = admin::plan_rebalance(t, {});
  after = apply(t, moves);
  CHECK(after.shards[2].slots == t.shards[2].slots);
  for (size_t i : {0, 1, 3}) CHECK(cluster::count_slots(after.shards[i].slots) == 3641);  // of 10923
  CHECK_THROWS_WITH_AS(admin::plan_rebalance(t, {t.shards[2].id}), doctest::Contains("has no primary"),
                       PlanError);
  CHECK_THROWS_WITH_AS(admin::plan_rebalance(t, {node(0).id, node(1).id, node(3).id}),
                       doctest::Contains("no shard with a primary is left"), PlanError);
  t = admin::start_migration(t, node(0).id, node(3).id, {{0, 0}}, "m1");
  CHECK_THROWS_WITH_AS(admin::plan_rebalance(t, {}), doctest::Contains("is running"), PlanError);
}

TEST_CASE("rebalance: random starts end with equal shares, moving only the surplus") {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    const size_t n = 1 + rng() % 6;
    std::vector<cluster::NodeAddress> nodes;
    for (size_t i = 0; i < n; ++i) nodes.push_back(node(static_cast<int>(i)));
    cluster::Topology t = admin::create(nodes, n, 0, "kv");
    // Cut the slots into pieces, each served by a random shard (some shards end empty).
    std::vector<uint32_t> cuts = {0, cluster::kSlots};
    for (size_t k = rng() % 30; k > 0; --k) cuts.push_back(1 + rng() % (cluster::kSlots - 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (cluster::Shard& s : t.shards) s.slots.clear();
    for (size_t i = 0; i + 1 < cuts.size(); ++i)
      cluster::add_slots(t.shards[rng() % n].slots, {static_cast<uint16_t>(cuts[i]),
                                                     static_cast<uint16_t>(cuts[i + 1] - 1)});
    std::vector<std::string> exclude;
    if (n > 1 && rng() % 3 == 0) exclude.push_back(t.shards[rng() % n].id);
    cluster::validate(t);

    const std::vector<admin::Move> moves = admin::plan_rebalance(t, exclude);
    const cluster::Topology after = apply(t, moves);
    const size_t sharing = n - exclude.size();
    std::vector<size_t> counts;
    size_t surplus = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t before = cluster::count_slots(t.shards[i].slots);
      const size_t now = cluster::count_slots(after.shards[i].slots);
      if (!exclude.empty() && t.shards[i].id == exclude[0]) {
        CHECK(now == 0);
        surplus += before;
        continue;
      }
      CHECK(now >= cluster::kSlots / sharing);
      CHECK(now <= cluster::kSlots / sharing + 1);
      if (before > now) surplus += before - now;
      counts.push_back(now);
    }
    size_t moved = 0;
    std::set<std::string> sources, targets;
    for (const admin::Move& m : moves) {
      moved += cluster::count_slots(m.slots);
      sources.insert(m.source_shard);
      targets.insert(m.target_shard);
    }
    CHECK(moved == surplus);  // nothing moves twice
    for (const std::string& s : sources) CHECK(targets.count(s) == 0);
    CHECK(admin::plan_rebalance(after, exclude).empty());
  }
}
