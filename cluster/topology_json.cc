// cluster/topology_json.cc - the JSON codec of Topology and NodeRecord (cluster/topology.h),
// with nlohmann-json.
//
// Topology, format 1:
//   {"format":1,"version":N,"name":"...",
//    "nodes":[{"id","host","port","tls_port","unix_socket","host_id"}],
//    "shards":[{"id","slots":[[first,last],...],"primary","replicas":[...],"primary_epoch"}],
//    "migrations":[{"id","slots":[[first,last],...],"source_shard","target_shard","state"}]}
// Required: format, version, nodes, shards; each node's id, host, port; each shard's id, slots,
// primary; every field of a migration. Optional fields default to zero or empty. Fields this
// format does not know are ignored (a later format adds fields, a format change bumps "format").
// 64-bit numbers are JSON numbers (unsigned integers).
//
// NodeRecord, format 1:
//   {"format":1,"address":{node fields as above},"role","shard","topology_version","repl_offset"}
#include <nlohmann/json.hpp>

#include <limits>
#include <string>

#include "cluster/topology.h"

namespace cluster {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr uint64_t kFormat = 1;

// Messages name the field at fault by its path: "topology.shards[1].slots[0] is 16384, ...".
[[noreturn]] void fail(const std::string& what) { throw TopologyError(what); }

// Typed access to one JSON object's fields; `where` names the object in messages.
class Fields {
 public:
  Fields(const Json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) fail(where_ + " is not a JSON object");
  }

  const Json* find(const char* name, bool required) const {
    auto it = j_.find(name);
    if (it == j_.end()) {
      if (required) fail(where_ + ": field \"" + name + "\" is missing");
      return nullptr;
    }
    return &*it;
  }

  uint64_t number(const char* name, bool required, uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    const Json* v = find(name, required);
    if (!v) return 0;
    return as_number(*v, where_ + "." + name, max);
  }

  std::string string(const char* name, bool required) const {
    const Json* v = find(name, required);
    if (!v) return {};
    if (!v->is_string()) fail(where_ + "." + name + " is not a string");
    return v->get<std::string>();
  }

  const Json& array(const char* name, bool required) const {
    static const Json kEmpty = Json::array();
    const Json* v = find(name, required);
    if (!v) return kEmpty;
    if (!v->is_array()) fail(where_ + "." + name + " is not an array");
    return *v;
  }

  static uint64_t as_number(const Json& v, const std::string& where, uint64_t max) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(where + " is not a non-negative integer");
    const uint64_t n = v.get<uint64_t>();
    if (n > max) fail(where + " is " + std::to_string(n) + ", more than " + std::to_string(max));
    return n;
  }

  const std::string& where() const { return where_; }

 private:
  const Json& j_;
  std::string where_;
};

OrderedJson ranges_json(const std::vector<SlotRange>& ranges) {
  OrderedJson a = OrderedJson::array();
  for (const SlotRange& r : ranges) a.push_back({r.first, r.last});
  return a;
}

std::vector<SlotRange> decode_ranges(const Json& a, const std::string& where) {
  std::vector<SlotRange> out;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!a[i].is_array() || a[i].size() != 2) fail(at + " is not a [first, last] pair");
    const auto first = static_cast<uint16_t>(Fields::as_number(a[i][0], at, kSlots - 1));
    const auto last = static_cast<uint16_t>(Fields::as_number(a[i][1], at, kSlots - 1));
    out.push_back({first, last});
  }
  return out;
}

std::vector<std::string> decode_strings(const Json& a, const std::string& where) {
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) fail(where + "[" + std::to_string(i) + "] is not a string");
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

OrderedJson address_json(const NodeAddress& n) {
  return {{"id", n.id},           {"host", n.host},
          {"port", n.port},       {"tls_port", n.tls_port},
          {"unix_socket", n.unix_socket}, {"host_id", n.host_id}};
}

NodeAddress decode_address(const Fields& f) {
  NodeAddress n;
  n.id = f.string("id", true);
  n.host = f.string("host", true);
  n.port = static_cast<uint16_t>(f.number("port", true, 65535));
  n.tls_port = static_cast<uint16_t>(f.number("tls_port", false, 65535));
  n.unix_socket = f.string("unix_socket", false);
  n.host_id = f.string("host_id", false);
  return n;
}

Json parse(std::string_view json, const char* what) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(std::string(what) + ": not valid JSON");
  return j;
}

void check_format(const Fields& f) {
  const uint64_t format = f.number("format", true);
  if (format != kFormat)
    fail(f.where() + ": format " + std::to_string(format) + " is not supported (this build reads 1)");
}

}  // namespace

std::string encode(const Topology& t) {
  OrderedJson j;
  j["format"] = kFormat;
  j["version"] = t.version;
  j["name"] = t.name;
  OrderedJson nodes = OrderedJson::array();
  for (const NodeAddress& n : t.nodes) nodes.push_back(address_json(n));
  j["nodes"] = std::move(nodes);
  OrderedJson shards = OrderedJson::array();
  for (const Shard& s : t.shards)
    shards.push_back({{"id", s.id},
                      {"slots", ranges_json(s.slots)},
                      {"primary", s.primary},
                      {"replicas", s.replicas},
                      {"primary_epoch", s.primary_epoch}});
  j["shards"] = std::move(shards);
  OrderedJson migrations = OrderedJson::array();
  for (const Migration& m : t.migrations)
    migrations.push_back({{"id", m.id},
                          {"slots", ranges_json(m.slots)},
                          {"source_shard", m.source_shard},
                          {"target_shard", m.target_shard},
                          {"state", m.state}});
  j["migrations"] = std::move(migrations);
  return j.dump();
}

Topology decode(std::string_view json) {
  const Json j = parse(json, "topology");
  const Fields root(j, "topology");
  check_format(root);
  Topology t;
  t.version = root.number("version", true);
  t.name = root.string("name", false);
  const Json& nodes = root.array("nodes", true);
  for (size_t i = 0; i < nodes.size(); ++i)
    t.nodes.push_back(decode_address(Fields(nodes[i], "topology.nodes[" + std::to_string(i) + "]")));
  const Json& shards = root.array("shards", true);
  for (size_t i = 0; i < shards.size(); ++i) {
    const Fields f(shards[i], "topology.shards[" + std::to_string(i) + "]");
    Shard s;
    s.id = f.string("id", true);
    s.slots = decode_ranges(f.array("slots", true), f.where() + ".slots");
    s.primary = f.string("primary", true);
    s.replicas = decode_strings(f.array("replicas", false), f.where() + ".replicas");
    s.primary_epoch = f.number("primary_epoch", false);
    t.shards.push_back(std::move(s));
  }
  const Json& migrations = root.array("migrations", false);
  for (size_t i = 0; i < migrations.size(); ++i) {
    const Fields f(migrations[i], "topology.migrations[" + std::to_string(i) + "]");
    Migration m;
    m.id = f.string("id", true);
    m.slots = decode_ranges(f.array("slots", true), f.where() + ".slots");
    m.source_shard = f.string("source_shard", true);
    m.target_shard = f.string("target_shard", true);
    m.state = f.string("state", true);
    t.migrations.push_back(std::move(m));
  }
  validate(t);
  return t;
}

std::string encode(const NodeRecord& r) {
  OrderedJson j;
  j["format"] = kFormat;
  j["address"] = address_json(r.address);
  j["role"] = r.role;
  j["shard"] = r.shard;
  j["topology_version"] = r.topology_version;
  j["repl_offset"] = r.repl_offset;
  return j.dump();
}

NodeRecord decode_node_record(std::string_view json) {
  const Json j = parse(json, "node record");
  const Fields root(j, "node record");
  check_format(root);
  const Json* address = root.find("address", true);
  NodeRecord r;
  r.address = decode_address(Fields(*address, "node record.address"));
  r.role = root.string("role", true);
  r.shard = root.string("shard", false);
  r.topology_version = root.number("topology_version", false);
  r.repl_offset = root.number("repl_offset", false);
  if (r.address.id.size() != 40 ||
      r.address.id.find_first_not_of("0123456789abcdef") != std::string::npos)
    fail("node record: id '" + r.address.id + "' is not 40 lowercase hex characters");
  if (r.role != "primary" && r.role != "replica" && r.role != "none")
    fail("node record: role '" + r.role + "' is not primary, replica or none");
  return r;
}

}  // namespace cluster
