// clients/admin/status.h - `stratakv-admin status`: the cluster as one table.
#pragma once

#include <cstdio>
#include <optional>
#include <vector>

#include "clients/admin/etcd_store.h"
#include "cluster/topology.h"

namespace admin {

/// Prints a line about the topology, then one row per node: shard, slots (on the primary's
/// row), host:port, role (primary, replica, or none for a registered node not in the topology),
/// id prefix, keys, used memory, SSD bytes (from the node's INFO; "-" when it does not answer
/// within 1 s), the lease's seconds left ("none": not registered) and the topology version the
/// node says it serves. Then, when the record has migrations, a line for each: id prefix,
/// slots, source -> target shard (id prefixes), state.
void print_status(const std::optional<cluster::Topology>& topology,
                  const std::vector<Registered>& registered, std::FILE* out);

}  // namespace admin
