// clients/admin/plan.cc - topology changes as pure functions. See plan.h.
#include "clients/admin/plan.h"

#include <algorithm>
#include <charconv>

namespace admin {

namespace {

std::string address_of(const cluster::NodeAddress& n) {
  return n.host + ":" + std::to_string(n.port);
}

bool names(const cluster::NodeAddress& n, std::string_view which) {
  return n.id == which || address_of(n) == which;
}

// The slots of `shard` without [first, last].
void remove_range(cluster::Shard& shard, uint16_t first, uint16_t last) {
  std::vector<cluster::SlotRange> kept;
  for (const cluster::SlotRange& r : shard.slots) {
    if (r.last < first || r.first > last) {
      kept.push_back(r);
      continue;
    }
    if (r.first < first) kept.push_back({r.first, static_cast<uint16_t>(first - 1)});
    if (r.last > last) kept.push_back({static_cast<uint16_t>(last + 1), r.last});
  }
  shard.slots = std::move(kept);
}

// Sorts and merges adjacent ranges.
void normalise(std::vector<cluster::SlotRange>& slots) {
  std::sort(slots.begin(), slots.end(),
            [](const cluster::SlotRange& a, const cluster::SlotRange& b) { return a.first < b.first; });
  std::vector<cluster::SlotRange> merged;
  for (const cluster::SlotRange& r : slots) {
    if (!merged.empty() && merged.back().last + 1u >= r.first)
      merged.back().last = std::max(merged.back().last, r.last);
    else merged.push_back(r);
  }
  slots = std::move(merged);
}

cluster::Topology next(const cluster::Topology& t) {
  cluster::Topology n = t;
  n.version = t.version + 1;
  return n;
}

}  // namespace

const cluster::NodeAddress& find_node(const std::vector<cluster::NodeAddress>& nodes,
                                      std::string_view which) {
  for (const cluster::NodeAddress& n : nodes)
    if (names(n, which)) return n;
  throw PlanError("no node " + std::string(which) + " (give a node id or host:port)");
}

size_t find_shard(const cluster::Topology& t, std::string_view which) {
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const cluster::Shard& s = t.shards[i];
    if (s.id == which) return i;
    std::vector<std::string> members = s.replicas;
    if (!s.primary.empty()) members.push_back(s.primary);
    for (const std::string& id : members)
      if (const cluster::NodeAddress* n = t.node(id); n != nullptr && names(*n, which)) return i;
  }
  throw PlanError("no shard " + std::string(which) +
                  " (give a shard id, or the id or host:port of one of its nodes)");
}

cluster::SlotRange parse_range(std::string_view text) {
  auto number = [&](std::string_view s) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v >= cluster::kSlots)
      throw PlanError("invalid slot range '" + std::string(text) + "' (0-16383, as first-last)");
    return static_cast<uint16_t>(v);
  };
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    const uint16_t s = number(text);
    return {s, s};
  }
  const cluster::SlotRange r{number(text.substr(0, dash)), number(text.substr(dash + 1))};
  if (r.first > r.last) throw PlanError("invalid slot range '" + std::string(text) + "'");
  return r;
}

cluster::Topology create(std::vector<cluster::NodeAddress> nodes, size_t shards, size_t replicas,
                         const std::string& name) {
  if (shards == 0 || shards > cluster::kSlots)
    throw PlanError("the number of shards must be 1 to 16384");
  const size_t needed = shards * (1 + replicas);
  if (nodes.size() < needed)
    throw PlanError(std::to_string(shards) + " shards with " + std::to_string(replicas) +
                    " replicas each need " + std::to_string(needed) + " nodes; " +
                    std::to_string(nodes.size()) + " are registered");
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.host != b.host ? a.host < b.host : a.port < b.port;
  });
  nodes.resize(needed);
  cluster::Topology t;
  t.version = 1;
  t.name = name;
  t.nodes = nodes;
  const std::vector<cluster::SlotRange> ranges = cluster::split_evenly(shards);
  for (size_t i = 0; i < shards; ++i) {
    cluster::Shard s;
    s.id = cluster::new_id();
    s.slots = {ranges[i]};
    s.primary = nodes[i].id;
    s.primary_epoch = 1;
    t.shards.push_back(std::move(s));
  }
  // Replicas: the rest, round-robin over the shards, preferring another host than the primary's.
  std::vector<cluster::NodeAddress> rest(nodes.begin() + static_cast<long>(shards), nodes.end());
  for (size_t round = 0; round < replicas; ++round) {
    for (size_t i = 0; i < shards; ++i) {
      const std::string& primary_host = nodes[i].host_id;
      auto pick = std::find_if(rest.begin(), rest.end(),
                               [&](const auto& n) { return n.host_id != primary_host; });
      if (pick == rest.end()) pick = rest.begin();
      t.shards[i].replicas.push_back(pick->id);
      rest.erase(pick);
    }
  }
  cluster::validate(t);
  return t;
}

cluster::Topology add_node(const cluster::Topology& t, const cluster::NodeAddress& node,
                           std::string_view replica_of) {
  if (t.node(node.id) != nullptr)
    throw PlanError("node " + address_of(node) + " is in the topology already");
  cluster::Topology n = next(t);
  n.nodes.push_back(node);
  if (replica_of.empty()) {
    cluster::Shard s;
    s.id = cluster::new_id();
    s.primary = node.id;
    s.primary_epoch = 1;
    n.shards.push_back(std::move(s));
  } else {
    n.shards[find_shard(t, replica_of)].replicas.push_back(node.id);
  }
  cluster::validate(n);
  return n;
}

cluster::Topology remove_node(const cluster::Topology& t, std::string_view which) {
  const cluster::NodeAddress& node = find_node(t.nodes, which);
  const std::string id = node.id;
  cluster::Topology n = next(t);
  for (size_t i = 0; i < n.shards.size(); ++i) {
    cluster::Shard& s = n.shards[i];
    if (s.primary == id) {
      if (!s.slots.empty())
        throw PlanError("node " + address_of(node) +
                        " is the primary of a shard that serves slots: move them first");
      if (!s.replicas.empty())
        throw PlanError("node " + address_of(node) + " is the primary of a shard with replicas");
      n.shards.erase(n.shards.begin() + static_cast<long>(i));
      break;
    }
    std::erase(s.replicas, id);
  }
  std::erase_if(n.nodes, [&](const cluster::NodeAddress& a) { return a.id == id; });
  cluster::validate(n);
  return n;
}

cluster::Topology assign_slots(const cluster::Topology& t, uint16_t first, uint16_t last,
                               std::string_view to) {
  if (first > last || last >= cluster::kSlots) throw PlanError("invalid slot range");
  const size_t target = find_shard(t, to);
  cluster::Topology n = next(t);
  for (cluster::Shard& s : n.shards) remove_range(s, first, last);
  n.shards[target].slots.push_back({first, last});
  normalise(n.shards[target].slots);
  cluster::validate(n);
  return n;
}

}  // namespace admin
