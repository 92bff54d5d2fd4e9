// cluster/topology.h - the cluster's topology: which shards exist, which node is each shard's
// primary and which are its replicas, which slot ranges each shard serves, which ranges are
// being migrated, and one version that orders every change (DESIGN.md "The cluster").
//
// One record holds it all. It lives in etcd (key "<prefix>/topology", changed only by
// compare-and-swap on its mod_revision) or, without etcd, in a JSON file
// (`cluster.topology-file`); both use the JSON codec below, so a file copied out of etcd serves
// as a static topology. Each node also registers itself under "<prefix>/nodes/<id>" with a
// lease (NodeRecord).
//
// Depends on nothing of ours but the slot math. Plain values: copy or share a const Topology
// between threads freely.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/slot.h"

namespace cluster {

/// Slots first..last, both included, first <= last < kSlots.
struct SlotRange {
  uint16_t first = 0;
  uint16_t last = 0;
  friend bool operator==(const SlotRange&, const SlotRange&) = default;
};

/// A node as clients reach it. `id` is 40 lowercase hex characters, made once per node and kept
/// in its data directory (as Redis keeps nodes.conf).
struct NodeAddress {
  std::string id;
  std::string host;         ///< announced IP or name (cluster-announce-ip), as -MOVED names it
  uint16_t port = 0;        ///< RESP over TCP (cluster-announce-port)
  uint16_t tls_port = 0;    ///< 0: none
  std::string unix_socket;  ///< the fast path's Unix socket; "" when it has none
  std::string host_id;      ///< identity of the machine (same value = shared memory possible)
  friend bool operator==(const NodeAddress&, const NodeAddress&) = default;
};

/// One shard: a primary, its replicas, and the slot ranges they serve.
struct Shard {
  std::string id;                     ///< 40 lowercase hex characters (CLUSTER MYSHARDID)
  std::vector<SlotRange> slots;       ///< sorted, disjoint
  std::string primary;                ///< a node id; "" = no primary (its slots are down)
  std::vector<std::string> replicas;  ///< node ids
  /// Bumped each time the primary changes (failover); a node serving as primary under an
  /// older epoch is fenced (replication issue).
  uint64_t primary_epoch = 0;
  friend bool operator==(const Shard&, const Shard&) = default;
};

/// A slot range moving from one shard to another (slot migration issue). While it exists the
/// source still owns the slots.
struct Migration {
  std::string id;  ///< unique per migration
  std::vector<SlotRange> slots;
  std::string source_shard;
  std::string target_shard;
  std::string state;  ///< "streaming", "handover", "done", "failed", "cancelled"
  friend bool operator==(const Migration&, const Migration&) = default;
};

/// The whole record. `version` increases by one with every change written; nodes apply only a
/// version newer than the one they have. It is what CLUSTER INFO calls cluster_current_epoch.
struct Topology {
  uint64_t version = 0;
  std::string name;  ///< the cluster's name (the etcd key prefix's last part by default)
  std::vector<NodeAddress> nodes;
  std::vector<Shard> shards;
  std::vector<Migration> migrations;
  friend bool operator==(const Topology&, const Topology&) = default;

  const NodeAddress* node(std::string_view id) const;
  const Shard* shard(std::string_view id) const;
  /// The shard whose primary or replica `node_id` is; nullptr if none.
  const Shard* shard_of_node(std::string_view node_id) const;
};

/// Raised by decode() and validate() with a message naming the field at fault.
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Checks what a decoder cannot: ids are 40 lowercase hex characters and unique, every node a
/// shard names exists and belongs to one shard only, slot ranges are in bounds, sorted and
/// disjoint across all shards, migrations name existing shards. Throws TopologyError.
void validate(const Topology& topology);

/// The JSON form (docs/cluster.md documents it). encode() output decodes to an equal value;
/// decode() rejects unknown versions of the format, missing or mistyped fields and anything
/// validate() rejects, with TopologyError. Ranges are written [first, last].
std::string encode(const Topology& topology);
Topology decode(std::string_view json);

/// Slot -> index into Topology::shards, built once per topology version. Unassigned slots map
/// to kNoShard.
class SlotMap {
 public:
  static constexpr uint16_t kNoShard = 0xFFFF;
  SlotMap() { shard_of_.fill(kNoShard); }
  explicit SlotMap(const Topology& topology);
  uint16_t shard_of(uint16_t slot) const { return shard_of_[slot]; }
  /// Number of slots assigned to some shard.
  size_t assigned() const;

 private:
  std::array<uint16_t, kSlots> shard_of_;
};

/// What a node writes under its lease at "<prefix>/nodes/<id>": its address and what it is
/// doing, read by the admin tool (`stratakv-admin status`, `add-node`) and by failover.
struct NodeRecord {
  NodeAddress address;
  std::string role;         ///< "primary", "replica" or "none" (not in the topology yet)
  std::string shard;        ///< its shard's id, "" when none
  uint64_t topology_version = 0;  ///< the version the node has applied
  uint64_t repl_offset = 0;       ///< replication offset (replication issue)
  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};
std::string encode(const NodeRecord& record);
NodeRecord decode_node_record(std::string_view json);

/// Splits slots 0..16383 into `n` contiguous ranges of nearly equal size: the first 16384 % n
/// get one slot more (redis-cli --cluster create rounds instead, so its ranges differ from these
/// by a slot: 0-5460, 5461-10922, 10923-16383 for three). 1 <= n <= kSlots, else throws
/// std::invalid_argument.
std::vector<SlotRange> split_evenly(size_t n);

/// Slot ranges as people read them: "0-99,200,300-310"; "-" for none.
std::string slots_text(const std::vector<SlotRange>& slots);

/// A new random 40-hex-character id (node or shard), from std::random_device.
std::string new_id();

// ---- Slot ranges and migrations: pure helpers for whoever writes the record -----------------

/// True for a migration still running ("streaming" or "handover"): its source serves its slots.
bool is_active(const Migration& m);

/// Sorts `ranges` and merges ranges that overlap or touch ([0,9] and [10,19] become [0,19]).
void normalize_slots(std::vector<SlotRange>& ranges);

/// Adds `range` to `ranges` (sorted and disjoint before and after), merging what touches it.
void add_slots(std::vector<SlotRange>& ranges, SlotRange range);

/// Removes `range` from `ranges` (sorted and disjoint before and after), splitting a range that
/// holds it partly. Slots of `range` that `ranges` does not hold are ignored.
void remove_slots(std::vector<SlotRange>& ranges, SlotRange range);

/// The number of slots in `ranges` (disjoint).
size_t count_slots(const std::vector<SlotRange>& ranges);

/// Completes the migration `migration_id` in `t`: its ranges leave the source shard's `slots`
/// and join the target's (kept sorted and merged), and its state becomes "done". For the
/// writer's compare-and-swap: it does not change `t.version` (the writer adds one) nor prune.
/// Returns false with `*error` set (when `error` is not null) and `t` unchanged when there is
/// no such migration, it is not active (streaming or handover), its shards are missing, or the
/// source does not serve all of its slots. On a `t` that passes validate(), so does the result.
bool move_slots(Topology& t, const std::string& migration_id, std::string* error);

/// Keeps every active migration of `t` and the `keep_finished` most recent finished ones
/// ("done", "failed", "cancelled"): finished entries are dropped oldest first, by their order
/// in `t.migrations` (append order). Order is kept. Whoever writes the record calls it.
void prune_migrations(Topology& t, size_t keep_finished = 16);

}  // namespace cluster
