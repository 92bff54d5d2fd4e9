// clients/admin/plan.h - the changes stratakv-admin makes to a cluster's topology, as pure
// functions of the current record and the registered nodes (no I/O: unit-tested in
// tests/unit/admin_plan_test.cc). Each returns the next record with its version one higher, or
// throws PlanError with a message for the operator. The tool writes the result with one
// compare-and-swap on the record's mod_revision (admin.cc), so two admins never both win.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/topology.h"

namespace admin {

/// A change the current topology does not allow, or arguments that name nothing.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A new cluster named `name` of `shards` shards with `replicas` replicas each, the slots split
/// evenly (cluster::split_evenly, as redis-cli --cluster create). Uses the first
/// shards * (1 + replicas) of `nodes` ordered by host, then port: shard i's primary is the i-th,
/// its replicas follow round-robin, never on the primary's host_id when another choice exists.
/// Version 1. Throws when there are too few nodes or shards is 0 or above kSlots.
cluster::Topology create(std::vector<cluster::NodeAddress> nodes, size_t shards, size_t replicas,
                         const std::string& name);

/// `node` joins `t`: as the primary of a new shard that serves no slot yet (`replica_of` empty),
/// or as a replica of the shard `replica_of` names (a shard id, or the id or host:port of one of
/// its nodes). Throws when the node is in the topology already.
cluster::Topology add_node(const cluster::Topology& t, const cluster::NodeAddress& node,
                           std::string_view replica_of);

/// The node `which` (an id or host:port) leaves `t`: a replica simply, a primary only when its
/// shard serves no slot and has no replica (the shard goes with it). Throws otherwise.
cluster::Topology remove_node(const cluster::Topology& t, std::string_view which);

/// Slots [first, last] are served by the shard `to` names (a shard id, or the id or host:port of
/// one of its nodes) from now on. The caller checks that the slots are empty (a slot with keys
/// moves by migration, not by this). Throws when `to` names nothing or the range is invalid.
cluster::Topology assign_slots(const cluster::Topology& t, uint16_t first, uint16_t last,
                               std::string_view to);

/// The index of the shard `which` names (a shard id, or the id or host:port of one of its
/// nodes); throws PlanError when none.
size_t find_shard(const cluster::Topology& t, std::string_view which);

/// The node `which` names (an id or host:port) among `nodes`; throws PlanError when none.
const cluster::NodeAddress& find_node(const std::vector<cluster::NodeAddress>& nodes,
                                      std::string_view which);

/// Parses "first-last" or "slot" into a range within [0, kSlots); throws PlanError.
cluster::SlotRange parse_range(std::string_view text);

}  // namespace admin
