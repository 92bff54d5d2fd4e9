// tests/fuzz/topology_fuzz.cc - libFuzzer target of the topology JSON codec (cluster/topology.h).
// decode() either throws TopologyError or gives a Topology that passes validate(); then
// encode() and decode() give an equal Topology, and encode() of that gives the same text. Any
// other exception escapes and is reported as a crash. The node-record decoder gets the same
// input and the same round trip.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cluster/topology.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);  // heap: ASan sees its end
  const std::string_view json(input);
  try {
    const cluster::Topology t = cluster::decode(json);
    cluster::validate(t);
    const std::string text = cluster::encode(t);
    const cluster::Topology back = cluster::decode(text);
    CHECK(back == t);
    CHECK(cluster::encode(back) == text);
    const cluster::SlotMap map(t);
    CHECK(map.assigned() <= cluster::kSlots);
    for (const auto& s : t.shards) CHECK(cluster::count_slots(s.slots) <= cluster::kSlots);
  } catch (const cluster::TopologyError&) {
  }
  try {
    const cluster::NodeRecord r = cluster::decode_node_record(json);
    const std::string text = cluster::encode(r);
    CHECK(cluster::decode_node_record(text) == r);
  } catch (const cluster::TopologyError&) {
  }
  return 0;
}
