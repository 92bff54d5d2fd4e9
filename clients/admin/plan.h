// clients/admin/plan.h - the changes stratakv-admin makes to a cluster's topology, as pure
// functions of the current record and the registered nodes (no I/O: unit-tested in
// tests/unit/admin_plan_test.cc). Each returns the next record with its version one higher, or
// throws PlanError with a message for the operator; each keeps the 16 most recent finished
// migrations (cluster::prune_migrations). The tool writes the result with one compare-and-swap
// on the record's mod_revision (main.cc), so two admins never both win.
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

// ---- Slot migration (docs/cluster.md, "Moving slots") -----------------------------------------

/// Starts migration `id` of `slots` from the shard `from` names to the shard `to` names (each a
/// shard id, or the id or host:port of one of its nodes): appends {id, slots sorted and merged,
/// source, target, "streaming"} to the migrations. The source's primary then streams the keys
/// and completes it (cluster::move_slots). Throws PlanError when `from` and `to` are one shard,
/// either has no primary, a slot is not served by `from` now, a slot is in an active migration,
/// or `slots` is empty.
cluster::Topology start_migration(const cluster::Topology& t, std::string_view from,
                                  std::string_view to, std::vector<cluster::SlotRange> slots,
                                  const std::string& id);

/// The index in t.migrations of the migration `which` names: its id or a prefix of it that only
/// it has (status prints 8 characters); "" names the only active one. Throws PlanError when it
/// names none or several.
size_t find_migration(const cluster::Topology& t, std::string_view which);

/// The active migration `which` names (as find_migration) becomes "cancelled"; its nodes roll
/// back and its slots stay with the source. Throws PlanError when it is not active.
cluster::Topology cancel_migration(const cluster::Topology& t, std::string_view which);

/// One step of a rebalance: `slots` move from shard `source_shard` to shard `target_shard`.
struct Move {
  std::string source_shard;               ///< shard id
  std::string target_shard;               ///< shard id
  std::vector<cluster::SlotRange> slots;  ///< sorted, merged
  friend bool operator==(const Move&, const Move&) = default;
};

/// The moves that share the slots evenly among the shards that have a primary, except those
/// `exclude` names (shard ids, or ids or host:port of their nodes), which give all their slots
/// away. Each of n sharing shards ends with floor(S / n) slots, S % n of them with one more
/// (those holding the most now, then the first in the record's order), where S counts the slots
/// of the shards with a primary. A shard above its share gives, one below receives; chunks are
/// whole ranges or the edge of a range, preferring those that touch the receiver's ranges, so
/// shards keep few ranges. Applying the moves in order keeps the topology valid. No moves when
/// every shard holds its share. Throws PlanError when a migration is active, no shard is left
/// to share the slots, or an excluded shard with slots has no primary. Shards without a primary
/// keep their slots and take no part.
std::vector<Move> plan_rebalance(const cluster::Topology& t,
                                 const std::vector<std::string>& exclude);

using cluster::slots_text;  // "0-99,200" (cluster/topology.h)

/// "shard 1a2b3c4d (127.0.0.1:7000)": a shard's short id and its primary's address ("no
/// primary" when it has none).
std::string describe_shard(const cluster::Topology& t, const cluster::Shard& shard);

}  // namespace admin
