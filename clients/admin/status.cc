// clients/admin/status.cc - `stratakv-admin status`: one table of the cluster (shards, slots,
// nodes, roles, keys, memory, SSD bytes, lease) and its migrations, from the topology and node
// records in etcd and each node's INFO (asked over RESP with a 1 s timeout; a node that does not
// answer shows "-").
#include "clients/admin/status.h"

#include <cstdio>
#include <map>
#include <string>

#include "clients/admin/node_links.h"
#include "clients/admin/plan.h"

namespace admin {

namespace {

std::string keys_of(const std::map<std::string, std::string>& info) {
  auto it = info.find("db0");
  if (it == info.end()) return info.empty() ? "-" : "0";
  const std::string& v = it->second;  // keys=N,expires=...
  const size_t eq = v.find('='), comma = v.find(',');
  return eq == std::string::npos ? "-" : v.substr(eq + 1, comma - eq - 1);
}

std::string field_or_dash(const std::map<std::string, std::string>& info, const char* name) {
  auto it = info.find(name);
  return it == info.end() ? "-" : it->second;
}

}  // namespace

void print_status(const std::optional<cluster::Topology>& topology,
                  const std::vector<Registered>& registered, std::FILE* out) {
  NodeLinks nodes(1000);
  std::map<std::string, const Registered*> by_id;
  for (const Registered& r : registered) by_id[r.record.address.id] = &r;
  if (!topology) {
    std::fprintf(out, "no topology yet: %zu node(s) registered (stratakv-admin create)\n",
                 registered.size());
  } else {
    std::fprintf(out, "cluster %s, topology version %llu, %zu shard(s), %zu node(s)\n",
                 topology->name.c_str(), static_cast<unsigned long long>(topology->version),
                 topology->shards.size(), topology->nodes.size());
  }
  std::fprintf(out, "%-8s %-14s %-21s %-8s %-8s %10s %12s %12s %6s %5s\n", "SHARD", "SLOTS", "NODE",
               "ROLE", "ID", "KEYS", "MEMORY", "SSD_BYTES", "LEASE", "VER");
  auto row = [&](const std::string& shard, const std::string& slots,
                 const cluster::NodeAddress& n, const char* role) {
    const auto info = nodes.info(n);
    auto reg = by_id.find(n.id);
    const std::string lease =
        reg == by_id.end() ? "none" : (reg->second->lease_ttl_left_s >= 0
                                           ? std::to_string(reg->second->lease_ttl_left_s) + "s"
                                           : "?");
    const std::string version =
        reg == by_id.end() ? "-" : std::to_string(reg->second->record.topology_version);
    std::fprintf(out, "%-8s %-14s %-21s %-8s %-8s %10s %12s %12s %6s %5s\n", shard.c_str(),
                 slots.c_str(), (n.host + ":" + std::to_string(n.port)).c_str(), role,
                 n.id.substr(0, 8).c_str(), keys_of(info).c_str(),
                 field_or_dash(info, "used_memory").c_str(),
                 field_or_dash(info, "ssd_bytes").c_str(), lease.c_str(), version.c_str());
  };
  if (topology) {
    for (const cluster::Shard& s : topology->shards) {
      const std::string shard = s.id.substr(0, 8), slots = slots_text(s.slots);
      if (const cluster::NodeAddress* p = topology->node(s.primary)) row(shard, slots, *p, "primary");
      for (const std::string& id : s.replicas)
        if (const cluster::NodeAddress* r = topology->node(id)) row(shard, "", *r, "replica");
    }
  }
  // Registered nodes the topology does not have yet (stratakv-admin add-node).
  for (const Registered& r : registered)
    if (!topology || topology->node(r.record.address.id) == nullptr)
      row("-", "-", r.record.address, "none");
  // The migrations the record keeps: the running ones and the recent finished ones.
  if (topology && !topology->migrations.empty()) {
    std::fprintf(out, "\n%-9s %-24s %-8s    %-8s %s\n", "MIGRATION", "SLOTS", "SOURCE", "TARGET",
                 "STATE");
    for (const cluster::Migration& m : topology->migrations)
      std::fprintf(out, "%-9s %-24s %-8s -> %-8s %s\n", m.id.substr(0, 8).c_str(),
                   slots_text(m.slots).c_str(), m.source_shard.substr(0, 8).c_str(),
                   m.target_shard.substr(0, 8).c_str(), m.state.c_str());
  }
}

}  // namespace admin
