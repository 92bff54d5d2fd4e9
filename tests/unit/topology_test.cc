// Unit tests of cluster/topology.h and cluster/topology_file.h: the JSON codec's round trips,
// each validation and decoding error, split_evenly, SlotMap, the node record codec, new_id and
// the file helpers.
#include <doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cluster/topology.h"
#include "cluster/topology_file.h"

using namespace cluster;
using Json = nlohmann::json;

namespace {

std::string id_of(char c) { return std::string(40, c); }

// Three nodes, two shards (a primary with a replica, a primary alone), one running migration.
Topology sample() {
  Topology t;
  t.version = 7;
  t.name = "test";
  t.nodes = {{id_of('a'), "10.0.0.1", 7000, 7400, "/run/stratakv/a.sock", "host-1"},
             {id_of('b'), "10.0.0.2", 7001, 0, "", "host-2"},
             {id_of('c'), "10.0.0.3", 7002, 0, "", "host-1"}};
  t.shards = {{id_of('1'), {{0, 99}, {200, 8191}}, id_of('a'), {id_of('c')}, 3},
              {id_of('2'), {{100, 199}, {8192, 16383}}, id_of('b'), {}, 1}};
  t.migrations = {{"m1", {{0, 9}}, id_of('1'), id_of('2'), "streaming"}};
  return t;
}

// Checks that validate() rejects `t` with a message containing `needle`.
void rejects(const Topology& t, const std::string& needle) {
  try {
    validate(t);
    FAIL("accepted; expected an error containing: " << needle);
  } catch (const TopologyError& e) {
    INFO("message: " << e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

// Edits the sample's JSON with `edit` and checks that decode() rejects it with `needle`.
void decode_rejects(const std::function<void(Json&)>& edit, const std::string& needle) {
  Json j = Json::parse(encode(sample()));
  edit(j);
  try {
    decode(j.dump());
    FAIL("decoded; expected an error containing: " << needle << " in " << j.dump());
  } catch (const TopologyError& e) {
    INFO("message: " << e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("topology: encode and decode round trip") {
  const Topology t = sample();
  CHECK_NOTHROW(validate(t));
  CHECK(decode(encode(t)) == t);

  Topology big = t;
  big.version = std::numeric_limits<uint64_t>::max();
  big.shards[0].primary_epoch = std::numeric_limits<uint64_t>::max() - 1;
  CHECK(decode(encode(big)) == big);
  CHECK(encode(big).find("18446744073709551615") != std::string::npos);  // a JSON number

  Topology empty;
  CHECK(decode(encode(empty)) == empty);

  const Json j = Json::parse(encode(t));  // the documented shape
  CHECK(j["format"] == 1);
  CHECK(j["version"] == 7);
  CHECK(j["shards"][0]["slots"] == Json::parse("[[0,99],[200,8191]]"));
  CHECK(j["nodes"][0]["tls_port"] == 7400);
  CHECK(j["migrations"][0]["state"] == "streaming");
}

TEST_CASE("topology: optional fields default, unknown fields are ignored") {
  const std::string n = id_of('a'), s = id_of('1');
  const Topology t = decode(R"({"format":1,"version":3,"future":{"x":1},
      "nodes":[{"id":")" + n + R"(","host":"h","port":1}],
      "shards":[{"id":")" + s + R"(","slots":[[0,16383]],"primary":")" + n + R"("}]})");
  CHECK(t.version == 3);
  CHECK(t.name.empty());
  CHECK(t.migrations.empty());
  CHECK(t.nodes[0].tls_port == 0);
  CHECK(t.nodes[0].unix_socket.empty());
  CHECK(t.shards[0].replicas.empty());
  CHECK(t.shards[0].primary_epoch == 0);
}

TEST_CASE("topology: decode rejects malformed JSON and unknown formats") {
  for (const char* text : {"", "{", "not json", "[]", "42", "null"})
    CHECK_THROWS_AS(decode(text), TopologyError);
  decode_rejects([](Json& j) { j.erase("format"); }, "\"format\" is missing");
  decode_rejects([](Json& j) { j["format"] = 2; }, "format 2 is not supported");
  decode_rejects([](Json& j) { j["format"] = "1"; }, "format is not a non-negative integer");
}

TEST_CASE("topology: decode rejects missing and mistyped fields") {
  decode_rejects([](Json& j) { j.erase("version"); }, "\"version\" is missing");
  decode_rejects([](Json& j) { j["version"] = "7"; }, "version is not a non-negative integer");
  decode_rejects([](Json& j) { j["version"] = -1; }, "version is not a non-negative integer");
  decode_rejects([](Json& j) { j["version"] = 1.5; }, "version is not a non-negative integer");
  decode_rejects([](Json& j) { j["name"] = 5; }, "name is not a string");
  decode_rejects([](Json& j) { j.erase("nodes"); }, "\"nodes\" is missing");
  decode_rejects([](Json& j) { j["nodes"] = Json::object(); }, "nodes is not an array");
  decode_rejects([](Json& j) { j["nodes"][0] = "x"; }, "nodes[0] is not a JSON object");
  decode_rejects([](Json& j) { j["nodes"][1].erase("id"); }, "nodes[1]: field \"id\" is missing");
  decode_rejects([](Json& j) { j["nodes"][0].erase("host"); }, "\"host\" is missing");
  decode_rejects([](Json& j) { j["nodes"][0].erase("port"); }, "\"port\" is missing");
  decode_rejects([](Json& j) { j["nodes"][0]["port"] = 65536; }, "nodes[0].port is 65536");
  decode_rejects([](Json& j) { j["nodes"][0]["port"] = "7000"; }, "nodes[0].port is not");
  decode_rejects([](Json& j) { j["nodes"][0]["tls_port"] = true; }, "tls_port is not");
  decode_rejects([](Json& j) { j["nodes"][0]["unix_socket"] = 1; }, "unix_socket is not a string");
  decode_rejects([](Json& j) { j.erase("shards"); }, "\"shards\" is missing");
  decode_rejects([](Json& j) { j["shards"][0].erase("slots"); }, "\"slots\" is missing");
  decode_rejects([](Json& j) { j["shards"][0].erase("primary"); }, "\"primary\" is missing");
  decode_rejects([](Json& j) { j["shards"][0]["slots"][0] = Json::array({1}); }, "is not a [first, last] pair");
  decode_rejects([](Json& j) { j["shards"][0]["slots"][0] = 5; }, "is not a [first, last] pair");
  decode_rejects([](Json& j) { j["shards"][1]["slots"][1][1] = 16384; }, "shards[1].slots[1] is 16384");
  decode_rejects([](Json& j) { j["shards"][0]["replicas"] = Json::array({1}); }, "replicas[0] is not a string");
  decode_rejects([](Json& j) { j["shards"][0]["primary_epoch"] = -3; }, "primary_epoch is not");
  decode_rejects([](Json& j) { j["migrations"] = 1; }, "migrations is not an array");
  for (const char* field : {"id", "slots", "source_shard", "target_shard", "state"})
    decode_rejects([&](Json& j) { j["migrations"][0].erase(field); },
                   std::string("migrations[0]: field \"") + field + "\" is missing");
}

TEST_CASE("topology: decode runs validate") {
  decode_rejects([](Json& j) { j["shards"][1]["primary"] = std::string(40, 'f'); }, "which is not in nodes");
}

TEST_CASE("topology: validate rejects bad ids") {
  Topology t = sample();
  t.nodes[0].id = std::string(40, 'A');
  rejects(t, "node id '" + std::string(40, 'A') + "' is not 40 lowercase hex");
  t = sample();
  t.nodes[1].id = "abc";
  rejects(t, "node id 'abc' is not 40");
  t = sample();
  t.nodes[2].id = t.nodes[0].id;
  rejects(t, "appears twice");
  t = sample();
  t.shards[0].id = std::string(39, '1') + "g";
  rejects(t, "shard id");
  t = sample();
  t.shards[1].id = t.shards[0].id;
  rejects(t, "shard id " + id_of('1') + " appears twice");
}

TEST_CASE("topology: validate rejects bad shard membership") {
  Topology t = sample();
  t.shards[0].replicas.push_back(id_of('d'));
  rejects(t, "names node " + id_of('d') + ", which is not in nodes");
  t = sample();
  t.shards[1].replicas.push_back(id_of('c'));  // c already replicates shard 1
  rejects(t, "node " + id_of('c') + " is named more than once");
  t = sample();
  t.shards[0].replicas.push_back(id_of('a'));  // primary and replica of one shard
  rejects(t, "is named more than once");
  t = sample();
  t.shards[0].replicas = {id_of('c'), id_of('c')};
  rejects(t, "is named more than once");
  t = sample();
  t.shards[1].primary.clear();  // no primary: allowed (its slots are down)
  CHECK_NOTHROW(validate(t));
}

TEST_CASE("topology: validate rejects bad slot ranges") {
  Topology t = sample();
  t.shards[0].slots[0] = {50, 40};
  rejects(t, "slot range [50, 40] is not within");
  t = sample();
  t.shards[1].slots[1] = {8192, 16384};
  rejects(t, "slot range [8192, 16384] is not within");
  t = sample();
  std::swap(t.shards[0].slots[0], t.shards[0].slots[1]);
  rejects(t, "must be sorted and disjoint");
  t = sample();
  t.shards[0].slots = {{0, 99}, {99, 99}};
  rejects(t, "must be sorted and disjoint");
  t = sample();
  t.shards[1].slots[0] = {99, 199};  // slot 99 is shard 1's
  rejects(t, "slot 99 is served by shard " + id_of('1') + " and by shard " + id_of('2'));
  t = sample();
  t.shards[1].slots = {{100, 199}};  // slots left unassigned: allowed
  CHECK_NOTHROW(validate(t));
}

TEST_CASE("topology: validate rejects bad migrations") {
  Topology t = sample();
  t.migrations[0].id.clear();
  rejects(t, "empty id");
  t = sample();
  t.migrations.push_back(t.migrations[0]);
  t.migrations[1].state = "done";
  rejects(t, "migration 'm1' appears twice");
  t = sample();
  t.migrations[0].state = "running";
  rejects(t, "unknown state 'running'");
  t = sample();
  t.migrations[0].source_shard = id_of('3');
  rejects(t, "source shard '" + id_of('3') + "' is not in shards");
  t = sample();
  t.migrations[0].target_shard = id_of('3');
  rejects(t, "target shard");
  t = sample();
  t.migrations[0].target_shard = t.migrations[0].source_shard;
  rejects(t, "source and target are the same shard");
  t = sample();
  t.migrations[0].slots.clear();
  rejects(t, "no slots");
  t = sample();
  t.migrations[0].slots = {{9, 0}};
  rejects(t, "migration 'm1': slot range [9, 0]");
  t = sample();
  t.migrations[0].slots = {{95, 105}};  // 100..105 are the target's
  rejects(t, "slot 100 is not served by its source shard");
  t = sample();
  t.migrations.push_back({"m2", {{5, 20}}, id_of('1'), id_of('2'), "handover"});
  rejects(t, "slot 5 is in two running migrations");
  t = sample();
  t.migrations[0].state = "done";  // finished: the target may own the slots already
  t.migrations[0].slots = {{100, 105}};
  CHECK_NOTHROW(validate(t));
}

TEST_CASE("topology: lookups") {
  const Topology t = sample();
  CHECK(t.node(id_of('b'))->port == 7001);
  CHECK(t.node(id_of('d')) == nullptr);
  CHECK(t.shard(id_of('2'))->primary == id_of('b'));
  CHECK(t.shard(id_of('3')) == nullptr);
  CHECK(t.shard_of_node(id_of('a'))->id == id_of('1'));
  CHECK(t.shard_of_node(id_of('c'))->id == id_of('1'));
  CHECK(t.shard_of_node(id_of('b'))->id == id_of('2'));
  CHECK(t.shard_of_node(id_of('d')) == nullptr);
}

TEST_CASE("split_evenly: contiguous, complete, first ranges one slot larger") {
  for (size_t n : {1, 3, 7, 16384}) {
    CAPTURE(n);
    const std::vector<SlotRange> r = split_evenly(n);
    REQUIRE(r.size() == n);
    CHECK(r.front().first == 0);
    CHECK(r.back().last == kSlots - 1);
    for (size_t i = 0; i < n; ++i) {
      const size_t size = r[i].last - r[i].first + 1u;
      CHECK(size == kSlots / n + (i < kSlots % n ? 1 : 0));
      if (i > 0) CHECK(r[i].first == r[i - 1].last + 1);
    }
  }
  CHECK(split_evenly(1) == std::vector<SlotRange>{{0, 16383}});
  CHECK(split_evenly(3) == std::vector<SlotRange>{{0, 5461}, {5462, 10922}, {10923, 16383}});
  CHECK(split_evenly(7)[3] == SlotRange{7023, 9363});  // 4 x 2341 then 2340 each
  CHECK(split_evenly(7)[4] == SlotRange{9364, 11703});
  CHECK(split_evenly(16384)[16383] == SlotRange{16383, 16383});
  CHECK_THROWS_AS(split_evenly(0), std::invalid_argument);
  CHECK_THROWS_AS(split_evenly(16385), std::invalid_argument);
}

TEST_CASE("SlotMap: slot to shard index") {
  const SlotMap none;
  CHECK(none.assigned() == 0);
  CHECK(none.shard_of(0) == SlotMap::kNoShard);

  const SlotMap m(sample());
  CHECK(m.assigned() == kSlots);
  CHECK(m.shard_of(0) == 0);
  CHECK(m.shard_of(99) == 0);
  CHECK(m.shard_of(100) == 1);
  CHECK(m.shard_of(199) == 1);
  CHECK(m.shard_of(200) == 0);
  CHECK(m.shard_of(8191) == 0);
  CHECK(m.shard_of(8192) == 1);
  CHECK(m.shard_of(16383) == 1);

  Topology partial = sample();
  partial.shards[1].slots = {{100, 199}};
  const SlotMap p(partial);
  CHECK(p.assigned() == kSlots - 8192);
  CHECK(p.shard_of(8192) == SlotMap::kNoShard);
  CHECK(p.shard_of(key_slot("foo")) == SlotMap::kNoShard);  // slot 12182
}

TEST_CASE("node record: round trip and errors") {
  NodeRecord r;
  r.address = sample().nodes[0];
  r.role = "replica";
  r.shard = id_of('1');
  r.topology_version = std::numeric_limits<uint64_t>::max();
  r.repl_offset = 123456789012345ULL;
  CHECK(decode_node_record(encode(r)) == r);
  const Json j = Json::parse(encode(r));
  CHECK(j["format"] == 1);
  CHECK(j["address"]["host"] == "10.0.0.1");

  auto rejected = [&](const std::function<void(Json&)>& edit, const std::string& needle) {
    Json e = Json::parse(encode(r));
    edit(e);
    try {
      decode_node_record(e.dump());
      FAIL("decoded " << e.dump());
    } catch (const TopologyError& err) {
      INFO("message: " << err.what());
      CHECK(std::string(err.what()).find(needle) != std::string::npos);
    }
  };
  rejected([](Json& e) { e["role"] = "leader"; }, "role 'leader'");
  rejected([](Json& e) { e["address"]["id"] = "xyz"; }, "id 'xyz'");
  rejected([](Json& e) { e.erase("address"); }, "\"address\" is missing");
  rejected([](Json& e) { e.erase("role"); }, "\"role\" is missing");
  rejected([](Json& e) { e["format"] = 9; }, "format 9");
  rejected([](Json& e) { e["repl_offset"] = "1"; }, "repl_offset is not");
  CHECK_THROWS_AS(decode_node_record("nope"), TopologyError);
}

TEST_CASE("new_id: 40 lowercase hex characters, different each time") {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string id = new_id();
    CHECK(id.size() == 40);
    CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(id);
  }
  CHECK(seen.size() == 100);
}

TEST_CASE("topology files: save atomically, load, reject bad files") {
  char tmpl[] = "/tmp/stratakv-topology-test-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::filesystem::path dir = tmpl;
  const std::string path = (dir / "topology.json").string();

  save_topology_file(path, sample());
  CHECK(load_topology_file(path) == sample());
  Topology next = sample();
  next.version = 8;
  save_topology_file(path, next);  // replaces the file
  CHECK(load_topology_file(path).version == 8);
  CHECK(std::distance(std::filesystem::directory_iterator(dir), {}) == 1);  // no temporary left

  CHECK_THROWS_WITH_AS(load_topology_file((dir / "missing.json").string()),
                       doctest::Contains("cannot open topology file"), TopologyError);
  std::ofstream(dir / "bad.json") << "{\"format\":1,\"version\":1}";
  CHECK_THROWS_WITH_AS(load_topology_file((dir / "bad.json").string()), doctest::Contains("bad.json"),
                       TopologyError);
  CHECK_THROWS_AS(save_topology_file((dir / "no-such-dir" / "t.json").string(), sample()), TopologyError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("slot ranges: normalize, add, remove, count") {
  std::vector<SlotRange> r = {{20, 29}, {0, 9}, {10, 15}, {5, 12}, {40, 40}};
  normalize_slots(r);
  CHECK(r == std::vector<SlotRange>{{0, 15}, {20, 29}, {40, 40}});
  CHECK(count_slots(r) == 16 + 10 + 1);
  add_slots(r, {16, 19});  // fills the gap: touching ranges merge
  CHECK(r == std::vector<SlotRange>{{0, 29}, {40, 40}});
  add_slots(r, {16383, 16383});
  add_slots(r, {35, 38});
  CHECK(r == std::vector<SlotRange>{{0, 29}, {35, 38}, {40, 40}, {16383, 16383}});
  remove_slots(r, {10, 19});  // splits a range
  CHECK(r == std::vector<SlotRange>{{0, 9}, {20, 29}, {35, 38}, {40, 40}, {16383, 16383}});
  remove_slots(r, {25, 40});  // cuts one, drops two
  CHECK(r == std::vector<SlotRange>{{0, 9}, {20, 24}, {16383, 16383}});
  remove_slots(r, {100, 200});  // not held: nothing
  remove_slots(r, {16383, 16383});
  remove_slots(r, {0, 0});
  CHECK(r == std::vector<SlotRange>{{1, 9}, {20, 24}});
  remove_slots(r, {0, 16383});
  CHECK(r.empty());
  CHECK(count_slots(r) == 0);
  add_slots(r, {0, 16383});
  CHECK(count_slots(r) == kSlots);
}

TEST_CASE("move_slots: the source loses the ranges, the target gains them merged, state done") {
  Topology t = sample();
  t.migrations[0].slots = {{0, 9}, {8000, 8191}};
  std::string error;
  REQUIRE(move_slots(t, "m1", &error));
  CHECK(error.empty());
  CHECK(t.version == 7);  // the writer bumps it
  CHECK(t.migrations[0].state == "done");
  CHECK(t.shards[0].slots == std::vector<SlotRange>{{10, 99}, {200, 7999}});
  CHECK(t.shards[1].slots == std::vector<SlotRange>{{0, 9}, {100, 199}, {8000, 16383}});
  CHECK_NOTHROW(validate(t));
  CHECK(SlotMap(t).assigned() == kSlots);

  // A handover completes too; a whole shard's slots can move, leaving it empty.
  t = sample();
  t.migrations[0].slots = {{0, 99}, {200, 8191}};
  t.migrations[0].state = "handover";
  REQUIRE(move_slots(t, "m1", nullptr));
  CHECK(t.shards[0].slots.empty());
  CHECK(t.shards[1].slots == std::vector<SlotRange>{{0, 16383}});
  CHECK_NOTHROW(validate(t));

  // Adjacent source ranges serve one migration range.
  t = sample();
  t.shards[0].slots = {{0, 49}, {50, 99}, {200, 8191}};
  t.migrations[0].slots = {{40, 60}};
  REQUIRE(move_slots(t, "m1", &error));
  CHECK(t.shards[0].slots == std::vector<SlotRange>{{0, 39}, {61, 99}, {200, 8191}});
  CHECK(t.shards[1].slots == std::vector<SlotRange>{{40, 60}, {100, 199}, {8192, 16383}});
}

TEST_CASE("move_slots: refusals leave the topology unchanged") {
  auto refused = [](Topology t, const std::string& id, const std::string& needle) {
    const Topology before = t;
    std::string error;
    CHECK_FALSE(move_slots(t, id, &error));
    INFO("error: " << error);
    CHECK(error.find(needle) != std::string::npos);
    CHECK(t == before);
    CHECK_FALSE(move_slots(t, id, nullptr));  // no error wanted: still refused
  };
  refused(sample(), "m9", "not in the topology");
  Topology t = sample();
  for (const char* state : {"done", "failed", "cancelled"}) {
    t.migrations[0].state = state;
    refused(t, "m1", "its state is '" + std::string(state) + "'");
  }
  t = sample();
  t.migrations[0].slots = {{0, 9}, {95, 105}};  // 100-105 are the target's
  refused(t, "m1", "slot 100 is not served by its source shard");
  t = sample();
  t.migrations[0].target_shard = id_of('3');
  refused(t, "m1", "target shard");
  t = sample();
  t.migrations[0].slots.clear();
  refused(t, "m1", "no slots");
}

TEST_CASE("prune_migrations: all active ones, the most recent finished ones, in order") {
  Topology t = sample();  // m1 streaming
  t.shards[0].slots = {{0, 8191}};
  t.shards[1].slots = {{8192, 16383}};
  for (int i = 0; i < 20; ++i)
    t.migrations.push_back({"f" + std::to_string(i), {{100, 199}}, id_of('1'), id_of('2'),
                            i % 3 == 0 ? "failed" : (i % 3 == 1 ? "done" : "cancelled")});
  t.migrations.push_back({"m2", {{20, 29}}, id_of('1'), id_of('2'), "handover"});
  Topology same = t;
  prune_migrations(same, 100);
  CHECK(same == t);
  prune_migrations(t);  // 16 finished kept: f4..f19
  REQUIRE(t.migrations.size() == 18);
  CHECK(t.migrations.front().id == "m1");
  CHECK(t.migrations[1].id == "f4");
  CHECK(t.migrations[16].id == "f19");
  CHECK(t.migrations.back().id == "m2");
  CHECK_NOTHROW(validate(t));
  prune_migrations(t, 0);
  REQUIRE(t.migrations.size() == 2);
  CHECK(t.migrations[0].id == "m1");
  CHECK(t.migrations[1].id == "m2");
}
