// slot_map.h - a client's picture of a cluster: which node serves each of the 16384 hash slots,
// and which replicas hold it (for reads, read_policy.h), as CLUSTER SLOTS tells it, with the topology's version (CLUSTER INFO's
// cluster_current_epoch), corrected slot by slot by -MOVED replies. A SlotMap is a value: the
// cluster layer (cluster_core.h) swaps whole maps, and a call routes all its keys with the one
// map it took. Also here: the texts of -MOVED and -ASK.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stratakv::detail {

/// A node of the cluster (a primary, or a replica in SlotMap::replicas()).
struct NodeAddress {
  std::string host;
  int port = 0;
  std::string id;  ///< the node's id (40 hex), "" when unknown (a node learnt from -MOVED)
  /// "host:port" (as -MOVED names nodes; IPv6 hosts without brackets, as Redis).
  std::string address() const { return host + ":" + std::to_string(port); }
};

/// Not thread-safe to modify; a const SlotMap may be read by any number of threads.
class SlotMap {
 public:
  static constexpr uint16_t kNone = 0xFFFF;  ///< owner() of a slot no node serves

  /// No slot served.
  SlotMap();
  /// Every slot served by `node` (a server outside cluster mode).
  static SlotMap single(NodeAddress node);
  /// Parses a CLUSTER SLOTS reply: [[first, last, [host, port, id, ...], replicas...], ...].
  /// An empty or "?" host (Redis: unknown endpoint) is `asked_host`, the host the reply came
  /// from. Throws Error(kProtocol) for another shape.
  static SlotMap from_cluster_slots(const redisReply* reply, std::string_view asked_host,
                                    uint64_t version);

  /// The topology's version the map was read at (0: unknown).
  uint64_t version() const { return version_; }
  /// The primaries that serve at least one slot (and nodes learnt from -MOVED).
  const std::vector<NodeAddress>& nodes() const { return nodes_; }
  /// Index in nodes() of the node serving `slot` (< 16384), or kNone.
  uint16_t owner(uint16_t slot) const { return owner_[slot]; }
  /// The node serving `slot`, or null.
  const NodeAddress* node_of(uint16_t slot) const {
    return owner_[slot] == kNone ? nullptr : &nodes_[owner_[slot]];
  }
  /// Slot `slot` is served by the node at host:port (added when unknown): a -MOVED's news.
  /// The slot's replicas are then unknown (replicas_of() is empty) until the next refresh.
  void set_owner(uint16_t slot, std::string_view host, int port);

  /// Every replica CLUSTER SLOTS listed (each once), in the order first listed.
  const std::vector<NodeAddress>& replicas() const { return replicas_; }
  /// Indices in replicas() of the replicas of `slot`'s shard (< 16384), in CLUSTER SLOTS's
  /// order; empty when it has none or they are unknown.
  std::span<const uint16_t> replicas_of(uint16_t slot) const {
    return replica_set_[slot] == kNone ? std::span<const uint16_t>{} : std::span<const uint16_t>(sets_[replica_set_[slot]]);
  }

 private:
  uint64_t version_ = 0;
  std::vector<NodeAddress> nodes_;
  std::vector<uint16_t> owner_;  // one per slot
  std::vector<NodeAddress> replicas_;
  std::vector<std::vector<uint16_t>> sets_;  // distinct replica sets, indices in replicas_
  std::vector<uint16_t> replica_set_;        // one per slot: index in sets_, or kNone
};

/// cluster_current_epoch of a CLUSTER INFO text (0 when absent).
uint64_t cluster_epoch(std::string_view info);

/// A -MOVED or -ASK reply: the slot and the node to ask.
struct Redirect {
  bool ask = false;  ///< -ASK (ask once, after ASKING) rather than -MOVED (the slot moved)
  uint16_t slot = 0;
  std::string host;
  int port = 0;
  std::string address() const { return host + ":" + std::to_string(port); }
};

/// Parses "MOVED 3999 127.0.0.1:6381" or "ASK 3999 [::1]:6381" (an error text without its
/// '-'); nullopt for any other text. The host is "" in Redis's "MOVED 3999 :6381" (the node
/// that replied, at another port).
std::optional<Redirect> parse_redirect(std::string_view error);

}  // namespace stratakv::detail
